// The schedule cache: compiled realize programs by request structure, in memory, least recently
// used first out, bounded by entry count. Thread-safe; programs are immutable and shared, so a
// hit runs without any lock held.
#pragma once

#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "core/engine/realize_key.h"

namespace polygrad {

struct RealizeProgram;

class ScheduleCache {
 public:
  // At most `max_entries` programs; 0 disables the cache (find misses, insert keeps nothing).
  explicit ScheduleCache(size_t max_entries);
  ~ScheduleCache();

  bool enabled() const { return max_entries_ > 0; }
  // The program stored under a key with exactly `key.structure` (a digest collision is a
  // miss), marked most recently used; null on a miss.
  std::shared_ptr<const RealizeProgram> find(const RealizeKey& key);
  // Stores `program` under `key`, replacing what was there, evicting the least recently used
  // entry beyond the bound.
  void insert(const RealizeKey& key, std::shared_ptr<const RealizeProgram> program);
  size_t size() const;

 private:
  struct Entry {
    std::string digest;
    std::string structure;
    std::shared_ptr<const RealizeProgram> program;
  };
  const size_t max_entries_;
  mutable std::mutex mu_;
  std::list<Entry> lru_;  // most recently used first
  std::unordered_map<std::string, std::list<Entry>::iterator> by_digest_;
};

}  // namespace polygrad
