# Runs the testthat suite and prints the plain `N passed, M failed` line the CI runner reads
# (testthat's own summary is not recognised there); exits 1 when a test failed or errored.
# Usage: Rscript tools/run_tests.R DIR (scripts/test runs it; R CMD check runs tests/testthat.R)
args <- commandArgs(trailingOnly = TRUE)
dir <- if (length(args)) args[1] else "testthat"
suppressMessages(library(polygrad))
res <- as.data.frame(testthat::test_dir(dir, reporter = "summary", load_package = "none", stop_on_failure = FALSE))
failed <- sum(res$failed) + sum(res$error)
passed <- sum(res$passed)
skipped <- sum(res$skipped)
cat(sprintf("%d passed, %d failed%s\n", passed, failed, if (skipped) sprintf(", %d skipped", skipped) else ""))
quit(status = if (failed > 0) 1L else 0L)
