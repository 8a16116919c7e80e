// CompileStepRequest bytes -> Session::compile_step on a fresh session holding one uploaded
// buffer (handle 1, float32 [2,2], so requests can name it): decoding its nodes, the inputs,
// outputs, materialize list and assigns checks, then Engine::compile_step, which schedules and renders the
// kernels and stops before compiling (the step's stop predicate is always true).
// Invariants: no crash, exception or sanitizer report; a refusal is the client's error with a
// message; a request that passes every check ends CANCELLED at the compile; either way the
// session is left as it was (the request's nodes erased, nothing more held).
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz/fuzz_server.h"
#include "polygrad/v1/polygrad.pb.h"
#include "server/session.h"

using namespace polygrad;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  v1::CompileStepRequest request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) return 0;
  return fuzz::guarded([&] {
    server::Session session("fuzz", fuzz::engine(), fuzz::limits(), /*first_handle=*/1);
    v1::UploadHeader header;
    header.set_dtype(v1::FLOAT32);
    header.add_shape(2);
    header.add_shape(2);
    absl::StatusOr<server::PendingUpload> upload = session.begin_upload(header);
    fuzz::check(upload.ok() && upload->append(std::string(16, '\0')).ok(), "the fixture's upload failed");
    absl::StatusOr<v1::UploadResponse> uploaded = session.finish_upload(*std::move(upload));
    fuzz::check(uploaded.ok() && uploaded->handle() == 1, "the fixture's upload has no handle 1");
    const uint64_t held = session.held_bytes();

    server::Transfer transfer;
    absl::StatusOr<v1::CompileStepResponse> step = session.compile_step(request, [] { return true; }, transfer);
    fuzz::check(!step.ok(), "compile_step compiled although told to stop");
    if (step.status().code() != absl::StatusCode::kCancelled) fuzz::check_refusal(step.status(), "compile_step");
    else if (fuzz::verbose()) std::fprintf(stderr, "compile_step passed every check: %s\n", step.status().ToString().c_str());
    fuzz::check(session.node_count() == 0 && session.step_count() == 0, "a failed compile_step left nodes or a step");
    fuzz::check(session.handle_count() == 1 && session.held_buffers() == 1 && session.held_bytes() == held,
                "a failed compile_step changed what the session holds");
  });
}
