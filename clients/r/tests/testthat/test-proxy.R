# Behind a real gRPC proxy (nginx's grpc_pass) that answers the Execute stream with UNIMPLEMENTED,
# as proxies that pass only unary calls do, the client asks for the stream once, then sends every
# realize and step run as a unary call, with the numbers of blocking dispatch straight to the
# daemon. nginx is a test dependency (scripts/install-deps --test): scripts/test fails without it.

skip_if_no_daemon()

nginx_binary <- function() {
  found <- Filter(file.exists, c("/usr/sbin/nginx", "/usr/bin/nginx"))
  if (length(found)) return(found[[1]])
  if (Sys.getenv("POLYGRAD_R_REQUIRE_DAEMON") == "1") stop("nginx is not installed (scripts/install-deps --test)")
  skip("nginx is not installed")
}

# nginx in front of the unix socket `upstream`, itself listening on a unix socket: list(address,
# log, pid file), once it accepts connections.
start_refusing_proxy <- function(upstream) {
  prefix <- tempfile("pg-nginx-")
  dir.create(prefix)
  sock <- file.path(prefix, "proxy.sock")
  log <- file.path(prefix, "access.log")
  conf <- file.path(prefix, "nginx.conf")
  writeLines(c(
    if (Sys.info()[["user"]] == "root") "user root;" else "",
    "daemon off;", "master_process off;",
    sprintf("pid %s/nginx.pid;", prefix), sprintf("error_log %s/error.log;", prefix),
    "events { worker_connections 64; }",
    "http {",
    sprintf("  client_body_temp_path %s/body;", prefix),
    "  log_format calls '$request_uri $status';",
    sprintf("  access_log %s calls;", log),
    "  server {",
    sprintf("    listen unix:%s http2;", sock),
    "    location = /polygrad.v1.Polygrad/Execute {",
    "      default_type application/grpc;",
    "      add_header grpc-status 12 always;",
    "      add_header grpc-message \"this proxy passes unary calls only\" always;",
    "      return 200;",
    "    }",
    "    location / {",
    sprintf("      grpc_pass unix:%s;", upstream),
    "      grpc_read_timeout 600s;", "      grpc_send_timeout 600s;", "      client_max_body_size 0;",
    "    }",
    "  }",
    "}"), conf)
  system2(nginx_binary(), c("-p", prefix, "-c", conf), wait = FALSE, stdout = FALSE, stderr = FALSE)
  wait_until(function() file.exists(sock), "nginx's socket")
  list(address = paste0("unix:", sock), log = log, pid = file.path(prefix, "nginx.pid"), prefix = prefix)
}

# A small MLP: 6 eager SGD steps (the loss read every other one), 4 compiled ones, then the sum of
# the first layer's weights.
train_losses <- function() {
  pg_manual_seed(3)
  x <- pg_randn(32, 20)
  y <- pg_tensor(diag(4)[rep(1:4, 8), ], dtype = "float32")
  w1 <- pg_randn(16, 20) * 0.3
  w2 <- pg_randn(4, 16) * 0.3
  for (p in list(w1, w2)) requires_grad(p) <- TRUE
  opt <- optim_sgd(list(w1, w2), lr = 0.05)
  train <- function(x, y, opt) {
    loss <- -mean(pg_sum(pg_log_softmax(pg_relu(x %*% t(w1)) %*% t(w2), -1) * y, 2))
    opt$zero_grad()
    backward(loss)
    opt$step()
    loss
  }
  losses <- numeric()
  for (i in 1:6) {
    loss <- train(x, y, opt)
    if (i %% 2 == 0) losses <- c(losses, pg_item(loss))
  }
  step <- compile_step(train, x = x, y = y, opt = opt)
  for (i in 1:4) step$run()
  c(losses, step$loss_value(), pg_item(pg_sum(w1)))
}

# A daemon of this test's own on a Unix socket (connecting elsewhere ends the suite's connection
# and its daemon): list(daemon, address).
own_daemon <- function() {
  work <- tempfile("pg-proxy-")
  dir.create(work)
  sock <- file.path(work, "d.sock")
  argv <- c(normalizePath(polygrad:::find_daemon_binary()), "--listen=", "--metrics-listen=",
            paste0("--unix-socket=", sock), paste0("--cache-dir=", file.path(work, "cache")))
  d <- list(pid = .Call(polygrad:::pg_c_spawn, argv, file.path(work, "polygradd.log")), dir = work)
  wait_until(function() file.exists(sock), "the daemon's socket")
  list(daemon = d, address = paste0("unix:", sock), sock = sock)
}

test_that("a proxy that refuses the Execute stream gets every call unary, with the same numbers", {
  own <- own_daemon()
  proxy <- start_refusing_proxy(own$sock)
  on.exit({
    if (file.exists(proxy$pid)) tools::pskill(as.integer(readLines(proxy$pid)))
    Sys.unsetenv("POLYGRAD_ASYNC")
    pg_disconnect()
    polygrad:::stop_daemon(own$daemon)
  }, add = TRUE)
  pg_connect(proxy$address)
  through <- train_losses()
  conn <- polygrad:::.pg$conn
  expect_true(isTRUE(conn$stream_refused))
  expect_equal(length(polygrad:::.pg$outstanding), 0L)
  Sys.setenv(POLYGRAD_ASYNC = "0")
  pg_connect(own$address)
  direct <- train_losses()
  expect_identical(through, direct)
  calls <- readLines(proxy$log)
  expect_equal(sum(startsWith(calls, "/polygrad.v1.Polygrad/Execute")), 1L)
  expect_true("/polygrad.v1.Polygrad/Execute 200" %in% calls)
  expect_equal(sum(startsWith(calls, "/polygrad.v1.Polygrad/RunStep")), 4L)
  expect_gte(sum(startsWith(calls, "/polygrad.v1.Polygrad/Realize")), 6L)
})

test_that("a loss left pending by a closed session is not sent by the next session's step", {
  own <- own_daemon()
  on.exit({
    pg_disconnect()
    polygrad:::stop_daemon(own$daemon)
  }, add = TRUE)
  pg_connect(own$address)
  w <- pg_tensor(c(1, 2))
  requires_grad(w) <- TRUE
  loss <- pg_sum(w * w)
  backward(loss)          # pending: the next optimizer step would realize it with the parameters
  pg_realize(loss * 2)    # sends the loss's node without realizing it
  lazy <- pg_sum(w * 3)   # unsent, reading w, which was sent
  backward(lazy)
  pg_connect(own$address) # a new session: the old one's nodes are gone
  v <- pg_tensor(c(3, 4))
  requires_grad(v) <- TRUE
  opt <- optim_sgd(list(v), lr = 0.5)
  backward(pg_sum(v * v))
  opt$step()
  expect_equal(as.vector(as.array(v)), c(0, 0))
  expect_false(is.null(loss) || is.null(lazy))
})
