// Generated from dualgrad/kernel_ops.py by `make shaders`: do not edit.
// Op codes (specialization constants select them) and the optimizer scalars'
// positions.
// unary
const uint NEG = 0, EXP = 1, LOG = 2, SQRT = 3, ABS = 4, RELU = 5, GELU = 6, SIGMOID = 7,
           TANH = 8, ADD_SCALAR = 9, MUL_SCALAR = 10, DIV_SCALAR = 11, RSUB_SCALAR = 12,
           RDIV_SCALAR = 13, POW_SCALAR = 14, RPOW_SCALAR = 15, CLAMP = 16, SILU = 17,
           SOFTPLUS = 18, SQUARE = 19, SIGN = 20, FLOOR = 21, CEIL = 22, ROUND = 23, TRUNC = 24,
           HARDTANH = 25, RECIPROCAL = 26, RSQRT = 27, EXP2 = 28, EXPM1 = 29, LOG2 = 30,
           LOG10 = 31, LOG1P = 32, LEAKY_RELU = 33, ELU = 34, SELU = 35, CELU = 36,
           HARDSIGMOID = 37, HARDSWISH = 38, SOFTSIGN = 39, LOGSIGMOID = 40, MISH = 41,
           GELU_TANH = 42, MAXIMUM_SCALAR = 43, MINIMUM_SCALAR = 44, SIN = 45, COS = 46,
           TAN = 47, ASIN = 48, ACOS = 49, ATAN = 50, SINH = 51, COSH = 52, ASINH = 53,
           ACOSH = 54, ATANH = 55, ERF = 56, ERFC = 57;
// binary
const uint ADD = 0, SUB = 1, MUL = 2, DIV = 3, POW = 4, MAXIMUM = 5, MINIMUM = 6, ATAN2 = 7,
           FMOD = 8, REMAINDER = 9, FLOOR_DIVIDE = 10;
// reduce
const uint SUM = 0, MEAN = 1, MAX = 2, PROD = 3, MIN = 4, SUM_SQUARES = 5, SUM_EXP = 6, VAR = 7;
// logic
const uint EQ = 0, NE = 1, LT = 2, LE = 3, GT = 4, GE = 5, LOGICAL_AND = 6, LOGICAL_OR = 7,
           LOGICAL_XOR = 8, ISNAN = 9, ISINF = 10, ISFINITE = 11, LOGICAL_NOT = 12;
// integer
const uint INT_ADD = 0, INT_SUB = 1, INT_MUL = 2, INT_FLOOR_DIVIDE = 3, INT_REMAINDER = 4,
           INT_MAXIMUM = 5, INT_MINIMUM = 6, INT_POW = 7, INT_NEG = 8, INT_ABS = 9;
// int_reduce
const uint INT_SUM = 0, INT_MAX = 1, INT_MIN = 2;
// reduce.comp's own: counts the elements equal to the maximum or minimum
const uint COUNT_EQ = 8;
// optimizer rules, their scalars' positions and the flags
const uint RULE_ADAM = 0, RULE_SGD = 1, RULE_RMSPROP = 2, RULE_ADAGRAD = 3, RULE_ADAMAX = 4,
           RULE_NADAM = 5, RULE_RADAM = 6;
const uint OPTIM_SCALARS = 9;
const uint ADAM_ONE_MINUS_BETA1 = 0, ADAM_BETA2 = 1, ADAM_ONE_MINUS_BETA2 = 2, ADAM_EPS = 3,
           ADAM_L2 = 4, ADAM_DECAY = 5, ADAM_STEP_SIZE = 6, ADAM_BC2_SQRT = 7;
const uint SGD_LR = 0, SGD_MOMENTUM = 1, SGD_DAMPENING = 2, SGD_WD = 3;
const uint RMSPROP_ALPHA = 0, RMSPROP_ONE_MINUS_ALPHA = 1, RMSPROP_EPS = 2, RMSPROP_L2 = 3,
           RMSPROP_LR = 4, RMSPROP_MOMENTUM = 5;
const uint ADAGRAD_L2 = 0, ADAGRAD_CLR = 1, ADAGRAD_EPS = 2;
const uint ADAMAX_ONE_MINUS_BETA1 = 0, ADAMAX_BETA2 = 1, ADAMAX_EPS = 2, ADAMAX_L2 = 3,
           ADAMAX_STEP_SIZE = 4;
const uint NADAM_ONE_MINUS_BETA1 = 0, NADAM_BETA2 = 1, NADAM_ONE_MINUS_BETA2 = 2, NADAM_EPS = 3,
           NADAM_L2 = 4, NADAM_DECAY = 5, NADAM_GRAD_COEF = 6, NADAM_M_COEF = 7,
           NADAM_BC2_SQRT = 8;
const uint RADAM_ONE_MINUS_BETA1 = 0, RADAM_BETA2 = 1, RADAM_ONE_MINUS_BETA2 = 2, RADAM_EPS = 3,
           RADAM_L2 = 4, RADAM_DECAY = 5, RADAM_STEP_SIZE = 6;
const uint FLAG_MAXIMIZE = 1, FLAG_MOMENTUM_BUFFER = 2, FLAG_NESTEROV = 4, FLAG_FIRST = 8,
           FLAG_AMSGRAD = 16, FLAG_CENTERED = 32, FLAG_RECTIFIED = 64;
