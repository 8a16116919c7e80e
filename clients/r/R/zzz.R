# Package state lives in one environment: the connection, the node table and the seed.
.pg <- new.env(parent = emptyenv())

.onLoad <- function(libname, pkgname) {
  graph_init()
  .pg$conn <- NULL
  .pg$pending_losses <- list()
}

#' @useDynLib polygrad, .registration = TRUE
#' @importFrom Rcpp evalCpp
NULL
