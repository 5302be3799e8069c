// Storage: reference-counted bytes on a device. Views of one tensor share a
// storage, and with it the version counter autograd uses to catch in-place
// edits of saved tensors.
#pragma once
#include <cstddef>
#include <cstdint>
#include <new>

#include "allocator.hpp"
#include "device.hpp"
#include "ref.hpp"
#include "trace_hooks.hpp"

namespace frost {

/// Allocates device memory for storages of a non-CPU device (registered by
/// the CUDA backend). `d` says which device of the backend's kind.
struct DeviceAllocator {
  virtual ~DeviceAllocator() = default;
  virtual void* allocate(std::size_t bytes, Device d) = 0;
  virtual void deallocate(void* p, std::size_t bytes) noexcept = 0;
};

struct StorageImpl : RefCounted {
  void* data = nullptr;
  std::size_t nbytes = 0;
  Device device;
  /// Bumped by every in-place write; shared by all views of the storage.
  std::uint32_t version = 0;
  DeviceAllocator* allocator = nullptr;  // null: CPU, header and data in one pooled block

  // CPU storages put the header and the data in one pooled block, so a new
  // tensor costs one allocation for its bytes.
  static constexpr std::size_t kHeader = 64;

  static Ref<StorageImpl> cpu(std::size_t nbytes) {
    void* block = detail::pool_alloc(kHeader + nbytes);
    auto* s = new (block) StorageImpl();
    s->data = static_cast<char*>(block) + kHeader;
    s->nbytes = nbytes;
    detail::note_alloc(static_cast<std::int64_t>(nbytes));
    auto r = Ref<StorageImpl>::adopt(s);
    if (detail::tracing()) detail::trace_hooks->on_alloc(s);  // after adopt: the tracer may take a reference
    return r;
  }

  static Ref<StorageImpl> on(Device d, std::size_t nbytes, DeviceAllocator* alloc) {
    if (d.is_cpu()) return cpu(nbytes);
    auto* s = new (detail::pool_alloc(sizeof(StorageImpl))) StorageImpl();
    s->device = d;
    s->allocator = alloc;
    s->nbytes = nbytes;
    try {
      s->data = alloc->allocate(nbytes, d);
    } catch (...) {
      s->~StorageImpl();
      detail::pool_free(s, sizeof(StorageImpl));
      throw;
    }
    detail::note_alloc(static_cast<std::int64_t>(nbytes));
    auto r = Ref<StorageImpl>::adopt(s);
    if (detail::tracing()) detail::trace_hooks->on_alloc(s);  // after adopt: the tracer may take a reference
    return r;
  }

  static void destroy(StorageImpl* s) {
    detail::note_free(static_cast<std::int64_t>(s->nbytes));
    if (s->allocator) {
      s->allocator->deallocate(s->data, s->nbytes);
      s->~StorageImpl();
      detail::pool_free(s, sizeof(StorageImpl));
    } else {
      const std::size_t n = s->nbytes;
      s->~StorageImpl();
      detail::pool_free(s, kHeader + n);
    }
  }
};
static_assert(sizeof(StorageImpl) <= StorageImpl::kHeader, "StorageImpl must fit its header slot");

}  // namespace frost
