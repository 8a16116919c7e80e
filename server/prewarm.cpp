#include "server/prewarm.h"

#include <fstream>
#include <sstream>
#include <string>

#include <google/protobuf/text_format.h>

#include "absl/strings/str_cat.h"

namespace polygrad::server {
namespace {

// A BUFFER node given by dtype and shape only becomes a handle to a zero-filled upload.
absl::Status fill_zero_buffers(v1::PrewarmGraph& graph, Session& session) {
  static const std::string kZeros(1 << 20, '\0');
  for (v1::Node& node : *graph.mutable_nodes()) {
    if (node.op() != v1::BUFFER || node.buffer().source_case() != v1::BufferSource::SOURCE_NOT_SET) continue;
    v1::UploadHeader header;
    header.set_dtype(node.dtype());
    *header.mutable_shape() = node.buffer().shape();
    absl::StatusOr<PendingUpload> upload = session.begin_upload(header);
    if (!upload.ok()) return absl::Status(upload.status().code(), absl::StrCat("node ", node.id(), ": ", upload.status().message()));
    for (uint64_t left = upload->buffer()->nbytes(); left > 0;) {
      const uint64_t n = std::min<uint64_t>(left, kZeros.size());
      if (absl::Status s = upload->append(std::string_view(kZeros.data(), n)); !s.ok()) return s;
      left -= n;
    }
    absl::StatusOr<v1::UploadResponse> done = session.finish_upload(*std::move(upload));
    if (!done.ok()) return done.status();
    node.mutable_buffer()->set_handle(done->handle());
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<v1::PrewarmManifest> load_manifest(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read prewarm manifest ", file.string()));
  std::stringstream ss;
  ss << in.rdbuf();
  v1::PrewarmManifest manifest;
  const std::string ext = file.extension().string();
  if (ext == ".pb" || ext == ".binpb") {
    if (!manifest.ParseFromString(ss.str()))
      return absl::InvalidArgumentError(absl::StrCat("prewarm manifest ", file.string(), " is not a binary PrewarmManifest"));
    return manifest;
  }
  if (!google::protobuf::TextFormat::ParseFromString(ss.str(), &manifest))
    return absl::InvalidArgumentError(
        absl::StrCat("prewarm manifest ", file.string(), " is not a text-format PrewarmManifest (binary ones end in .pb)"));
  return manifest;
}

// Prewarm's own sessions belong to a tenant no token can name (tenants are [A-Za-z0-9._-]), so
// they neither count against a client's quota nor are reachable by one.
constexpr std::string_view kPrewarmTenant = "polygradd:prewarm";

absl::StatusOr<v1::PrewarmResponse> prewarm(const v1::PrewarmManifest& manifest, SessionManager& sessions,
                                            const std::function<bool()>& should_stop) {
  const Clock::time_point start = Clock::now();
  v1::PrewarmResponse out;
  for (int i = 0; i < manifest.graphs_size(); ++i) {
    v1::PrewarmGraph graph = manifest.graphs(i);
    const std::string what = absl::StrCat("prewarm graph ", i, graph.name().empty() ? "" : " (", graph.name(),
                                          graph.name().empty() ? "" : ")");
    absl::StatusOr<std::shared_ptr<Session>> session = sessions.create(kPrewarmTenant);
    if (!session.ok()) return absl::Status(session.status().code(), absl::StrCat(what, ": ", session.status().message()));
    absl::StatusOr<v1::RealizeResponse> r = absl::UnknownError("not run");
    if (absl::Status s = fill_zero_buffers(graph, **session); !s.ok()) {
      r = s;
    } else {
      v1::RealizeRequest request;
      *request.mutable_nodes() = std::move(*graph.mutable_nodes());
      *request.mutable_outputs() = graph.outputs();
      Transfer transfer;
      // The optimized compiler only: prewarmed kernels are final (on disk when prewarm returns).
      r = (*session)->realize(request, should_stop, transfer, Session::QuickTier::kRefused, manifest.tune());
    }
    (void)sessions.close((*session)->id(), kPrewarmTenant, "prewarm done");
    if (!r.ok()) return absl::Status(r.status().code(), absl::StrCat(what, ": ", r.status().message()));
    out.set_graphs(out.graphs() + 1);
    out.set_kernels(out.kernels() + r->stats().kernels());
    out.set_compiled(out.compiled() + r->stats().compiled());
    out.set_cache_hits(out.cache_hits() + r->stats().cache_hits());
  }
  out.set_seconds(std::chrono::duration<double>(Clock::now() - start).count());
  return out;
}

}  // namespace polygrad::server
