// CompileSlots (core/engine/compile_slots.h): never more holders than slots, no waiter left asleep
// while a slot is free, and a waiter that is told to stop leaves holding none.
#include "core/engine/compile_slots.h"

#include <atomic>
#include <future>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace polygrad {
namespace {

TEST(CompileSlots, NeverMoreHoldersThanSlotsAndEveryAcquireReturns) {
  // Many short holds by more threads than slots: a lost wake-up would leave a thread asleep with
  // a slot free, and this test would not finish.
  constexpr unsigned kSlots = 2;
  CompileSlots slots(kSlots);
  std::atomic<int> holding{0}, most{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 2000; ++i) {
        ASSERT_TRUE(slots.acquire({}));
        int now = holding.fetch_add(1) + 1;
        for (int m = most.load(); now > m && !most.compare_exchange_weak(m, now);) {
        }
        holding.fetch_sub(1);
        slots.release();
      }
    });
  for (std::thread& t : threads) t.join();
  EXPECT_LE(most.load(), static_cast<int>(kSlots));
  EXPECT_EQ(slots.available(), kSlots);
}

TEST(CompileSlots, AWaiterToldToStopReturnsHoldingNone) {
  CompileSlots slots(1);
  ASSERT_TRUE(slots.acquire({}));
  std::atomic<int> asked{0};
  // Says stop on the second question: the call has waited at least one poll by then.
  EXPECT_FALSE(slots.acquire([&] { return ++asked >= 2; }, std::chrono::milliseconds(1)));
  EXPECT_GE(asked.load(), 2);
  EXPECT_EQ(slots.available(), 0u);
  slots.release();
  EXPECT_EQ(slots.available(), 1u);
}

TEST(CompileSlots, AReleaseHandsTheSlotToAWaiter) {
  CompileSlots slots(1);
  ASSERT_TRUE(slots.acquire({}));
  std::promise<void> asked_once;
  std::atomic<bool> first{true};
  auto waiter = std::async(std::launch::async, [&] {
    // Reports that it waits (its stop function is asked only while no slot is free), never stops.
    return slots.acquire([&] {
      if (first.exchange(false)) asked_once.set_value();
      return false;
    });
  });
  asked_once.get_future().wait();
  slots.release();
  EXPECT_TRUE(waiter.get());
  EXPECT_EQ(slots.available(), 0u);
}

}  // namespace
}  // namespace polygrad
