# pg_rearrange (einops' notation into reshapes and a permute) and pg_from_url (bytes over http).

skip_if_no_daemon()

v <- function(t) as.vector(as.array(t))

test_that("pg_rearrange splits, merges and reorders named axes in shape order", {
  a <- pg_reshape(pg_arange(24), c(2, 6, 2))
  y <- pg_rearrange(a, "b (h w) c -> b h w c", h = 2)
  expect_equal(dim(y), c(2, 2, 3, 2))
  expect_equal(pg_bytes(y), pg_bytes(a))  # a split keeps the row-major order
  expect_equal(as.array(pg_rearrange(a, "b x c -> c b x")), as.array(pg_permute(a, c(3, 1, 2))))
  expect_equal(dim(pg_rearrange(a, "b x c -> (b x) () c")), c(12, 1, 2))
  expect_error(pg_rearrange(a, "b (h w) c -> b h w c"), "cannot infer both h, w from size 6")
  expect_error(pg_rearrange(a, "b (h w) c -> b h w c", h = 4), "size 6 does not split by 4")
  expect_error(pg_rearrange(a, "b x c -> b x"), "same axes once each")
  expect_error(pg_rearrange(a, "b x c"), "needs one '->'")
})

test_that("pg_from_url reads an http URL's bytes, gunzipped when asked", {
  py <- python_bin()
  skip_if(!nzchar(py), "no Python for the test's HTTP server")
  dir <- tempfile("pg-url-")
  dir.create(dir)
  payload <- as.raw(rep(0:255, 3))
  writeBin(payload, file.path(dir, "data"))
  writeBin(memCompress(payload, "gzip"), file.path(dir, "data.gz"))
  ready <- file.path(dir, "ready")
  server <- paste(
    "import http.server, functools, os, sys",
    "h = functools.partial(http.server.SimpleHTTPRequestHandler, directory=sys.argv[1])",
    "h.log_message = lambda *a: None",
    "s = http.server.ThreadingHTTPServer(('127.0.0.1', 0), h)",
    "open(sys.argv[2] + '.tmp', 'w').write(f'{s.server_address[1]} {os.getpid()}')",
    "os.rename(sys.argv[2] + '.tmp', sys.argv[2])",
    "s.serve_forever()", sep = "\n")
  system2(py, c("-c", shQuote(server), shQuote(dir), shQuote(ready)), wait = FALSE)
  deadline <- Sys.time() + 60
  while (!file.exists(ready) && Sys.time() < deadline) Sys.sleep(0.05)  # the server says when it listens
  expect_true(file.exists(ready))
  info <- as.numeric(strsplit(readLines(ready, warn = FALSE), " ")[[1]])
  on.exit(tools::pskill(info[2]), add = TRUE)
  base <- sprintf("http://127.0.0.1:%d", info[1])
  t <- pg_from_url(paste0(base, "/data"))
  expect_equal(pg_dtype(t), "uint8")
  expect_equal(pg_bytes(t), payload)
  expect_equal(pg_bytes(pg_from_url(paste0(base, "/data.gz"), gunzip = TRUE)), payload)
  expect_error(pg_from_url("file:///etc/passwd"), "http:// and https://")
})
