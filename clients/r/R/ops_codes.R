# Wire op numbers, from proto/polygrad/v1/polygrad.proto (a test checks them against the proto).
OP <- list(BUFFER = 1, CONST = 2, NEG = 10, EXP2 = 11, LOG2 = 12, SQRT = 13, RECIPROCAL = 14, SIN = 15,
           CAST = 16, ADD = 30, SUB = 31, MUL = 32, DIV = 33, MAX = 34, CMPLT = 35, CMPNE = 36, WHERE = 37,
           IDIV = 38, MOD = 39, AND = 40, OR = 41, XOR = 42, REDUCE_SUM = 50, REDUCE_MAX = 51,
           RESHAPE = 70, PERMUTE = 71, EXPAND = 72, PAD = 73, SHRINK = 74, FLIP = 75, GRADIENT = 90,
           MATMUL = 100, SOFTMAX = 101, LOG_SOFTMAX = 102, LOGSUMEXP = 103, MEAN = 104, VAR = 105,
           LAYERNORM = 106, EXP = 110, LOG = 111, RELU = 112, SIGMOID = 113, TANH = 114, GELU = 115,
           SILU = 116, ARANGE = 120, CONV2D = 121, MAX_POOL2D = 122, AVG_POOL2D = 123, CUMSUM = 124,
           ONE_HOT = 125, ARGMAX = 126, ARGMIN = 127, TRIL = 128, TRIU = 129, GATHER = 130,
           REDUCE_PROD = 131, POW = 132, RAND = 133, RANDN = 134, RANDINT = 135, DROPOUT = 136,
           CONV_TRANSPOSE2D = 137, RMS_NORM = 138, GROUP_NORM = 139, BATCHNORM_TRAIN = 140,
           BATCHNORM_EVAL = 141, SCALED_DOT_PRODUCT_ATTENTION = 142,
           SCALED_DOT_PRODUCT_ATTENTION_MASKED = 143, BITCAST = 144, COPY = 145, ERF = 146, ATAN = 147,
           ASIN = 148, ACOS = 149, SINH = 150, COSH = 151, ASINH = 152, ACOSH = 153, ATANH = 154, LOG10 = 155,
           LOG1P = 156, EXPM1 = 157, LOGADDEXP = 158, COPYSIGN = 159, LERP = 160, SOFTSIGN = 161, CELU = 162,
           SELU = 163, ISFINITE = 164, ISCLOSE = 165)
# Ops whose argument is a CompositeArg (the rest of the composites take none).
COMPOSITE_ARG_OPS <- unlist(OP[c("SOFTMAX", "LOG_SOFTMAX", "LOGSUMEXP", "MEAN", "VAR", "LAYERNORM", "CONV2D",
                                 "MAX_POOL2D", "AVG_POOL2D", "CUMSUM", "ONE_HOT", "ARGMAX", "ARGMIN", "TRIL",
                                 "TRIU", "GATHER", "RAND", "RANDN", "RANDINT", "DROPOUT", "CONV_TRANSPOSE2D",
                                 "RMS_NORM", "GROUP_NORM", "BATCHNORM_TRAIN", "BATCHNORM_EVAL",
                                 "SCALED_DOT_PRODUCT_ATTENTION", "SCALED_DOT_PRODUCT_ATTENTION_MASKED",
                                 "COPY", "CELU", "ISCLOSE")])
