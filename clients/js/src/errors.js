'use strict';
// Errors keep the daemon's gRPC status name (.code) and its message (.details), which names the
// node and op that failed.

class PolygradError extends Error {
  constructor(message, code = null, details = '') {
    super(message);
    this.name = this.constructor.name;
    this.code = code; // 'INVALID_ARGUMENT', 'NOT_FOUND', ... or null for client-side errors
    this.details = details || message;
  }
}
class PolygradConnectionError extends PolygradError {}
class PolygradInvalidArgument extends PolygradError {}
class PolygradNotFound extends PolygradError {}
class PolygradResourceExhausted extends PolygradError {}
class PolygradUnauthenticated extends PolygradError {}
class PolygradPermissionDenied extends PolygradError {}
class PolygradTimeout extends PolygradError {}
class PolygradUnimplemented extends PolygradError {}

const BY_CODE = {
  INVALID_ARGUMENT: PolygradInvalidArgument,
  FAILED_PRECONDITION: PolygradInvalidArgument,
  OUT_OF_RANGE: PolygradInvalidArgument,
  NOT_FOUND: PolygradNotFound,
  RESOURCE_EXHAUSTED: PolygradResourceExhausted,
  UNAUTHENTICATED: PolygradUnauthenticated,
  PERMISSION_DENIED: PolygradPermissionDenied,
  DEADLINE_EXCEEDED: PolygradTimeout,
  UNIMPLEMENTED: PolygradUnimplemented,
  UNAVAILABLE: PolygradConnectionError,
};

// gRPC's status codes by number (fixed by the gRPC specification; no transport library needed, so
// the browser build has the same table).
const CODE_NAMES = ['OK', 'CANCELLED', 'UNKNOWN', 'INVALID_ARGUMENT', 'DEADLINE_EXCEEDED', 'NOT_FOUND', 'ALREADY_EXISTS',
  'PERMISSION_DENIED', 'RESOURCE_EXHAUSTED', 'FAILED_PRECONDITION', 'ABORTED', 'OUT_OF_RANGE', 'UNIMPLEMENTED', 'INTERNAL',
  'UNAVAILABLE', 'DATA_LOSS', 'UNAUTHENTICATED'];

// The PolygradError subclass for a grpc-js ServiceError from call `what`.
function fromGrpcError(err, what, address = '') {
  const name = CODE_NAMES[err.code] || 'UNKNOWN';
  const details = err.details || err.message || String(err);
  const Cls = BY_CODE[name] || PolygradError;
  const msg = Cls === PolygradConnectionError
    ? `cannot reach polygradd at ${address} (${what}: ${name}: ${details})`
    : `${what} failed: ${name}: ${details}`;
  return new Cls(msg, name, details);
}

// The error of a command that failed inside the Execute stream: its Error message carries the
// numeric gRPC code the command would have had as a unary call.
function fromStatus(code, message, what, address = '') {
  return fromGrpcError({ code, details: message }, what, address);
}

module.exports = {
  PolygradError, PolygradConnectionError, PolygradInvalidArgument, PolygradNotFound, PolygradResourceExhausted,
  PolygradUnauthenticated, PolygradPermissionDenied, PolygradTimeout, PolygradUnimplemented, fromGrpcError, fromStatus,
};
