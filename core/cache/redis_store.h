// The Redis remote store: entries under the key "polygrad:ac:<remote_entry_name(key)>", read with
// GET, probed with EXISTS and written with SET ... NX (a concurrent writer's equal entry is kept).
// A small RESP2 client of our own over TCP: a few commands, each bounded by the timeout (connect
// included); connections are pooled and a connection that failed is closed, never reused.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "core/cache/remote_store.h"

namespace polygrad {

// `user` empty with a `password`: AUTH password (requirepass); both: AUTH user password (ACL).
std::unique_ptr<RemoteStore> make_redis_store(std::string host, int port, int db, std::string user,
                                              std::string password, std::chrono::milliseconds timeout);

}  // namespace polygrad
