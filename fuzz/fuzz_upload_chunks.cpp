// The upload assembler (server/session.h): a header's dtype and shape from the input, then
// chunks of the input's bytes appended in turn, then the upload finished.
// Invariants: no crash, exception or sanitizer report; a header is refused as the client's error
// or gives a buffer of exactly dtype size x elements; a chunk is accepted iff it fits in what is
// left, and a refused one changes nothing; finishing succeeds iff every byte arrived, and the
// buffer then holds exactly the bytes sent (bools as 0/1); a failed upload leaves nothing held.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "fuzz/fuzz_server.h"
#include "server/session.h"

using namespace polygrad;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  return fuzz::guarded([&] {
    server::Session session("fuzz", fuzz::engine(), fuzz::limits(), /*first_handle=*/1);
    v1::UploadHeader header;
    // Past the last dtype too, so unknown values are tried.
    header.set_dtype(static_cast<v1::DType>(in.ConsumeIntegralInRange<int>(-1, v1::DType_MAX + 2)));
    const int rank = in.ConsumeIntegralInRange<int>(0, 8);
    for (int i = 0; i < rank; ++i) {
      // Mostly small dimensions (a buffer gets allocated), sometimes any int64.
      header.add_shape(in.ConsumeBool() ? in.ConsumeIntegralInRange<int64_t>(-1, 9) : in.ConsumeIntegral<int64_t>());
    }
    absl::StatusOr<server::PendingUpload> upload = session.begin_upload(header);
    if (!upload.ok()) {
      fuzz::check_refusal(upload.status(), "begin_upload");
      fuzz::check(session.held_buffers() == 0 && session.held_bytes() == 0, "a refused header holds room");
      return;
    }
    const std::optional<DType> dtype = server::from_wire(header.dtype());
    fuzz::check(dtype.has_value(), "an unknown dtype was accepted");
    uint64_t want = dtype_itemsize(*dtype);
    for (int64_t d : header.shape()) want *= static_cast<uint64_t>(d);  // within max_elements: accepted
    const BufferPtr buffer = upload->buffer();
    fuzz::check(buffer->nbytes() == want && buffer->dtype() == *dtype, "the upload buffer has the wrong size");

    std::string sent;
    for (int chunks = 0; chunks < 32 && in.remaining_bytes() > 0; ++chunks) {
      const std::string chunk = in.ConsumeBytesAsString(in.ConsumeIntegralInRange<size_t>(0, want + 4));
      const bool fits = chunk.size() <= want - sent.size();
      absl::Status s = upload->append(chunk);
      if (fits) {
        if (!s.ok()) fuzz::fail("a chunk that fits was refused: " + s.ToString());
        sent += chunk;
      } else {
        fuzz::check_refusal(s, "append past the end");
      }
      fuzz::check(upload->received() == sent.size(), "received() differs from the bytes accepted");
    }

    absl::StatusOr<v1::UploadResponse> done = session.finish_upload(*std::move(upload));
    if (sent.size() != want) {
      fuzz::check_refusal(done.status(), "finish_upload of an incomplete upload");
      fuzz::check(session.handle_count() == 0 && session.held_buffers() == 0 && session.held_bytes() == 0,
                  "a failed upload left something held");
      return;
    }
    if (!done.ok()) fuzz::fail("finishing a complete upload failed: " + done.status().ToString());
    fuzz::check(done->bytes() == want && session.held_bytes() == want, "the handle's byte count is wrong");
    absl::StatusOr<BufferPtr> stored = session.buffer(done->handle());
    fuzz::check(stored.ok() && *stored == buffer, "the handle does not name the uploaded buffer");
    if (*dtype == DType::Bool) {
      for (char& c : sent) c = c != 0;
    }
    fuzz::check(want == 0 || std::memcmp(buffer->data(), sent.data(), want) == 0, "the buffer differs from the bytes sent");
  });
}
