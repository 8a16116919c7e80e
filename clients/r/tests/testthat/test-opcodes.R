# The R op and dtype tables must be the proto's: a renumbered or missing entry would send a
# different op than the code means.

proto_enum <- function(name) {
  lines <- readLines(system.file("proto", "polygrad", "v1", "polygrad.proto", package = "polygrad"))
  start <- grep(sprintf("^enum %s \\{", name), lines)
  end <- start + which(lines[start:length(lines)] == "}")[1] - 1
  m <- regmatches(lines[start:end], regexec("^\\s*([A-Z0-9_]+) = ([0-9]+);", lines[start:end]))
  m <- Filter(length, m)
  stats::setNames(as.numeric(vapply(m, `[`, "", 3)), vapply(m, `[`, "", 2))
}

test_that("OP matches the proto's Op enum, every op", {
  ops <- proto_enum("Op")
  ops <- ops[names(ops) != "OP_UNSPECIFIED"]
  expect_equal(unlist(polygrad:::OP)[names(ops)], ops)
  expect_setequal(names(polygrad:::OP), names(ops))
})

test_that("dtype wire codes match the proto's DType enum", {
  dts <- proto_enum("DType")
  r <- polygrad:::.dtype_wire
  expect_equal(as.numeric(r), as.numeric(dts[toupper(names(r))]))
})
