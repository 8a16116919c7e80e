// node:assert/strict inside a page: the npm `assert` package (a port of Node's) in strict mode.
import assert from 'assert';

export default assert.strict;
