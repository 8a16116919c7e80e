#include "core/schedule/schedule_cache.h"

#include <utility>
#include <vector>

#include "core/schedule/realize_program.h"

namespace polygrad {

ScheduleCache::ScheduleCache(size_t max_entries, size_t max_structure_bytes)
    : max_entries_(max_entries), max_structure_bytes_(max_structure_bytes) {}
ScheduleCache::~ScheduleCache() = default;

std::shared_ptr<const RealizeProgram> ScheduleCache::find(const RealizeKey& key) {
  if (!enabled()) return nullptr;
  std::lock_guard lock(mu_);
  auto it = by_digest_.find(key.digest);
  if (it == by_digest_.end() || it->second->structure != key.structure) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->program;
}

void ScheduleCache::insert(const RealizeKey& key, std::shared_ptr<const RealizeProgram> program) {
  if (!enabled() || key.structure.size() > max_structure_bytes_) return;
  std::vector<std::shared_ptr<const RealizeProgram>> evicted;  // released after the lock
  std::lock_guard lock(mu_);
  if (auto it = by_digest_.find(key.digest); it != by_digest_.end()) {
    structure_bytes_ -= it->second->structure.size();
    evicted.push_back(std::move(it->second->program));
    lru_.erase(it->second);
    by_digest_.erase(it);
  }
  lru_.push_front(Entry{key.digest, key.structure, std::move(program)});
  by_digest_.emplace(key.digest, lru_.begin());
  structure_bytes_ += key.structure.size();
  while (lru_.size() > max_entries_ || structure_bytes_ > max_structure_bytes_) {
    structure_bytes_ -= lru_.back().structure.size();
    evicted.push_back(std::move(lru_.back().program));
    by_digest_.erase(lru_.back().digest);
    lru_.pop_back();
  }
}

size_t ScheduleCache::size() const {
  std::lock_guard lock(mu_);
  return lru_.size();
}

}  // namespace polygrad
