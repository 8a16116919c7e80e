# Acceptance 6: the README's R quick start and examples/r run verbatim (each in a fresh R process
# against the suite's daemon, as a user would run them).

skip_if_no_daemon()

run_r <- function(file) {
  env <- paste0("POLYGRAD_ADDRESS=", polygrad:::.pg$conn$address)
  lib <- paste0("R_LIBS=", paste(.libPaths(), collapse = ":"))
  out <- system2(file.path(R.home("bin"), "Rscript"), file, stdout = TRUE, stderr = TRUE, env = c(env, lib))
  list(status = attr(out, "status") %||% 0L, out = out)
}
`%||%` <- function(a, b) if (is.null(a)) b else a

test_that("the README's R quick start runs verbatim", {
  root <- source_root()
  skip_if(!nzchar(root), "needs the source tree")
  md <- readLines(file.path(root, "README.md"))
  start <- which(md == "## Using it from R")
  expect_length(start, 1)
  open <- which(md == "```r" & seq_along(md) > start)[1]
  close <- which(md == "```" & seq_along(md) > open)[1]
  code <- md[(open + 1):(close - 1)]
  f <- tempfile(fileext = ".R")
  writeLines(code, f)
  r <- run_r(f)
  expect_equal(r$status, 0L, info = paste(r$out, collapse = "\n"))
  expect_true("[1,]   36   45" %in% r$out)  # a %*% t(a) + 1
  expect_true("[1] 2" %in% r$out)  # two softmax rows, each summing to 1
})

test_that("examples/r run verbatim", {
  root <- source_root()
  skip_if(!nzchar(root), "needs the source tree")
  files <- list.files(file.path(root, "examples", "r"), pattern = "\\.R$", full.names = TRUE)
  expect_gt(length(files), 0)
  for (f in files) {
    r <- run_r(f)
    expect_equal(r$status, 0L, info = paste(c(f, r$out), collapse = "\n"))
  }
})
