// The schedule cache: compiled realize programs by request structure, in memory, least recently
// used first out, bounded by entry count (and, as a safeguard, by the bytes of the structures it
// keeps to compare). Thread-safe; programs are immutable and shared, so a hit runs without any
// lock held.
#pragma once

#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "core/schedule/realize_key.h"

namespace polygrad {

struct RealizeProgram;

class ScheduleCache {
 public:
  // Keys keep their full structure (~50 bytes a node) for the comparison on a hit; this bounds
  // them together, so many entries of huge graphs cannot take unbounded memory.
  static constexpr size_t kDefaultMaxStructureBytes = size_t{256} << 20;

  // At most `max_entries` programs and `max_structure_bytes` of keys (a structure larger than
  // that is not kept); max_entries 0 disables the cache (find misses, insert keeps nothing).
  explicit ScheduleCache(size_t max_entries, size_t max_structure_bytes = kDefaultMaxStructureBytes);
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
    uint64_t digest;
    std::string structure;
    std::shared_ptr<const RealizeProgram> program;
  };
  const size_t max_entries_;
  const size_t max_structure_bytes_;
  mutable std::mutex mu_;
  size_t structure_bytes_ = 0;
  std::list<Entry> lru_;  // most recently used first
  std::unordered_map<uint64_t, std::list<Entry>::iterator> by_digest_;
};

}  // namespace polygrad
