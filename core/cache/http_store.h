// The HTTP remote store: entries at <base>/ac/<remote_entry_name(key)>, read with GET, probed
// with HEAD and written with PUT — the layout of bazel-remote's HTTP cache (run it with
// --disable_http_ac_validation: our entries are not Bazel ActionResults) and of any WebDAV
// server that accepts PUT into new directories (nginx: dav_methods PUT; create_full_put_path on).
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "core/cache/remote_store.h"

namespace polygrad {

// `base`: the URL without a trailing slash (credentials in it are used, never shown);
// `shown`: the same without credentials, for describe().
std::unique_ptr<RemoteStore> make_http_store(std::string base, std::string shown, std::chrono::milliseconds timeout);

}  // namespace polygrad
