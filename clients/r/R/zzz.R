# Package state lives in one environment: the connection, the node table and the seed.
.pg <- new.env(parent = emptyenv())
