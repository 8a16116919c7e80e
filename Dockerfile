# syntax=docker/dockerfile:1
#
# polygradd image: build stage with the CUDA toolkit, slim run-time stage.
#
#   docker build -t polygrad/polygradd .
#   docker run --rm -p 127.0.0.1:50051:50051 -p 127.0.0.1:9464:9464 \
#     -v polygrad-cache:/var/cache/polygrad [--gpus all] polygrad/polygradd
#
# The build stage runs the same scripts as CI (scripts/install-deps, scripts/build), which is
# how CI exercises these steps on machines without a Docker engine. The run-time stage installs
# exactly the packages that own the libraries the binary links (scripts/runtime-deps), plus
# clang: polygradd compiles CPU kernels at run time with the system C compiler, and tcc: the
# quick compile tier (libtcc, linked statically) needs TinyCC's run-time files. CUDA kernels
# are compiled with NVRTC, which the CUDA runtime base image provides; the daemon dlopen()s
# libcuda and NVRTC, so the same image starts (CPU only) on a host without a GPU.
#
# The browser playground (examples/browser and the JavaScript client's browser build, bundled
# in a Node stage with the client's lockfile) is in /usr/share/polygrad/playground; the gRPC-Web
# port and the page are off unless asked for:
#   docker run --rm -p 127.0.0.1:8080:8080 polygrad/polygradd \
#     --web-listen=0.0.0.0:8080 --web-playground=/usr/share/polygrad/playground
ARG CUDA_VERSION=13.0.1
ARG UBUNTU_VERSION=ubuntu24.04

FROM nvidia/cuda:${CUDA_VERSION}-devel-${UBUNTU_VERSION} AS build
ENV DEBIAN_FRONTEND=noninteractive
WORKDIR /src
# Dependencies first, so this layer is reused until the package list changes.
COPY scripts/install-deps scripts/install-deps
RUN scripts/install-deps
COPY . .
RUN --mount=type=cache,target=/root/.cache/ccache \
    scripts/build build -DPOLYGRAD_TESTS=OFF \
 && mkdir -p /out \
 && cp build/polygradd /out/polygradd \
 && cp clients/js/src/ops.gen.js /out/ops.gen.js \
 && scripts/runtime-deps build/polygradd > /out/runtime-packages.txt \
 && echo "run-time packages:" && cat /out/runtime-packages.txt

FROM node:20-bookworm-slim AS browser
WORKDIR /src
COPY proto proto
COPY clients/js clients/js
COPY examples/browser examples/browser
# The client's op table, generated from the op schema by the build stage (scripts/gen-ops).
COPY --from=build /out/ops.gen.js clients/js/src/ops.gen.js
RUN cd clients/js \
 && npm ci --no-audit --no-fund \
 && mkdir -p /out/playground \
 && cp ../../examples/browser/index.html ../../examples/browser/playground.js /out/playground/ \
 && node scripts/build-browser.mjs /out/playground \
 && ls -l /out/playground

FROM nvidia/cuda:${CUDA_VERSION}-runtime-${UBUNTU_VERSION} AS runtime
ENV DEBIAN_FRONTEND=noninteractive
COPY --from=build /out/runtime-packages.txt /tmp/runtime-packages.txt
# hadolint ignore=DL3008,SC2046
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      $(cat /tmp/runtime-packages.txt) clang tcc libc6-dev binutils curl ca-certificates \
 && rm -rf /var/lib/apt/lists/* /tmp/runtime-packages.txt
RUN useradd --system --uid 10001 --user-group --home-dir /var/lib/polygrad --create-home \
      --shell /usr/sbin/nologin polygrad \
 && mkdir -p /var/cache/polygrad \
 && chown polygrad:polygrad /var/cache/polygrad
COPY --from=build /out/polygradd /usr/local/bin/polygradd
COPY --from=browser /out/playground /usr/share/polygrad/playground

USER polygrad
WORKDIR /var/lib/polygrad
ENV HOME=/var/lib/polygrad
VOLUME ["/var/cache/polygrad"]
# 50051: gRPC (no TLS yet, hence --insecure-allow-remote); 9464: Prometheus /metrics.
EXPOSE 50051 9464
# No grpc_health_probe is packaged; /metrics is served for as long as the daemon is up.
# (Kubernetes uses its native gRPC probe against grpc.health.v1 instead: deploy/k8s.)
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
  CMD curl -fsS -o /dev/null http://127.0.0.1:9464/metrics || exit 1
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/polygradd", \
            "--listen=0.0.0.0:50051", \
            "--insecure-allow-remote", \
            "--metrics-listen=0.0.0.0:9464", \
            "--cache-dir=/var/cache/polygrad"]
