// The ES module entry: the CommonJS implementation re-exported, so both entries share one graph
// and one connection.
import polygrad from './src/index.js';

export const {
  Tensor, dtypes, DType, nn, compileStep, CompiledStep, jit, JitError, Variable, SymInt, BoundVariable, connect, close,
  synchronize, graphStats, flushReleases,
  PolygradError, PolygradConnectionError, PolygradInvalidArgument, PolygradNotFound, PolygradResourceExhausted,
  PolygradUnauthenticated, PolygradPermissionDenied, PolygradTimeout, PolygradUnimplemented,
} = polygrad;
export default polygrad;
