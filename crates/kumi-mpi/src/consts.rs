//! Handle and constant values of the MPICH ABI (the facts `mpi.h` encodes).
//!
//! Handle layout (MPICH's): bits 30-31 the kind of handle (1 built-in, 2
//! indirect = created by the program, 0 invalid/null), bits 26-29 the object
//! type, the low bits an index. Built-in datatype handles carry their size in
//! bits 8-15.
use std::ffi::c_int;

pub const MPI_SUCCESS: c_int = 0;
pub const MPI_ERR_BUFFER: c_int = 1;
pub const MPI_ERR_COUNT: c_int = 2;
pub const MPI_ERR_TYPE: c_int = 3;
pub const MPI_ERR_TAG: c_int = 4;
pub const MPI_ERR_COMM: c_int = 5;
pub const MPI_ERR_RANK: c_int = 6;
pub const MPI_ERR_ROOT: c_int = 7;
pub const MPI_ERR_GROUP: c_int = 8;
pub const MPI_ERR_OP: c_int = 9;
pub const MPI_ERR_TOPOLOGY: c_int = 10;
pub const MPI_ERR_DIMS: c_int = 11;
pub const MPI_ERR_ARG: c_int = 12;
pub const MPI_ERR_UNKNOWN: c_int = 13;
pub const MPI_ERR_TRUNCATE: c_int = 14;
pub const MPI_ERR_OTHER: c_int = 15;
pub const MPI_ERR_INTERN: c_int = 16;
pub const MPI_ERR_IN_STATUS: c_int = 17;
pub const MPI_ERR_PENDING: c_int = 18;
pub const MPI_ERR_REQUEST: c_int = 19;
pub const MPI_ERR_ACCESS: c_int = 20;
pub const MPI_ERR_AMODE: c_int = 21;
pub const MPI_ERR_BAD_FILE: c_int = 22;
pub const MPI_ERR_CONVERSION: c_int = 23;
pub const MPI_ERR_FILE_EXISTS: c_int = 25;
pub const MPI_ERR_FILE_IN_USE: c_int = 26;
pub const MPI_ERR_FILE: c_int = 27;
pub const MPI_ERR_INFO: c_int = 28;
pub const MPI_ERR_INFO_KEY: c_int = 29;
pub const MPI_ERR_INFO_VALUE: c_int = 30;
pub const MPI_ERR_INFO_NOKEY: c_int = 31;
pub const MPI_ERR_IO: c_int = 32;
pub const MPI_ERR_NO_MEM: c_int = 34;
pub const MPI_ERR_NOT_SAME: c_int = 35;
pub const MPI_ERR_NO_SPACE: c_int = 36;
pub const MPI_ERR_NO_SUCH_FILE: c_int = 37;
pub const MPI_ERR_QUOTA: c_int = 39;
pub const MPI_ERR_READ_ONLY: c_int = 40;
pub const MPI_ERR_UNSUPPORTED_DATAREP: c_int = 43;
pub const MPI_ERR_UNSUPPORTED_OPERATION: c_int = 44;
pub const MPI_ERR_KEYVAL: c_int = 48;
pub const MPI_ERR_ERRHANDLER: c_int = 80;
pub const MPI_ERR_LASTCODE: c_int = 0x3fffffff;

pub const MPI_COMM_NULL: c_int = 0x04000000;
pub const MPI_COMM_WORLD: c_int = 0x44000000;
pub const MPI_COMM_SELF: c_int = 0x44000001;
pub const MPI_GROUP_NULL: c_int = 0x08000000;
pub const MPI_GROUP_EMPTY: c_int = 0x48000000;
pub const MPI_DATATYPE_NULL: c_int = 0x0c000000;
/// MPI-1's bound markers (types of no data; see `types::structure`).
pub const MPI_LB: c_int = 0x4c000010;
pub const MPI_UB: c_int = 0x4c000011;
pub const MPI_OP_NULL: c_int = 0x18000000;
pub const MPI_REQUEST_NULL: c_int = 0x2c000000;
pub const MPI_MESSAGE_NULL: c_int = 0x2c000000;
pub const MPI_MESSAGE_NO_PROC: c_int = 0x6c000000;
pub const MPI_ERRHANDLER_NULL: c_int = 0x14000000;
pub const MPI_ERRORS_ARE_FATAL: c_int = 0x54000000;
pub const MPI_ERRORS_RETURN: c_int = 0x54000001;
pub const MPI_ERRORS_ABORT: c_int = 0x54000003;
pub const MPI_INFO_NULL: c_int = 0x1c000000;
pub const MPI_INFO_ENV: c_int = 0x5c000001;
pub const MPI_KEYVAL_INVALID: c_int = 0x24000000;

/// Base of program-created handles of each object type (indirect kind).
pub const NEW_COMM: c_int = 0x84000000u32 as c_int;
pub const NEW_GROUP: c_int = 0x88000000u32 as c_int;
pub const NEW_TYPE: c_int = 0x8c000100u32 as c_int;
pub const NEW_ERRH: c_int = 0x94000000u32 as c_int;
pub const NEW_OP: c_int = 0x98000000u32 as c_int;
pub const NEW_INFO: c_int = 0x9c000000u32 as c_int;
pub const NEW_KEYVAL: c_int = 0xa4000000u32 as c_int;
pub const NEW_REQUEST: c_int = 0xac000000u32 as c_int;
/// Requests that are a packed [`kumi::raw::Ticket`] (no table entry): the
/// request kind with MPICH's "indirect" bits, which no other request has.
pub const TICKET_REQUEST: c_int = 0xec000000u32 as c_int;

pub const MPI_PROC_NULL: c_int = -1;
pub const MPI_ANY_SOURCE: c_int = -2;
pub const MPI_ROOT: c_int = -3;
pub const MPI_ANY_TAG: c_int = -1;
pub const MPI_UNDEFINED: c_int = -32766;
pub const MPI_IDENT: c_int = 0;
pub const MPI_CONGRUENT: c_int = 1;
pub const MPI_SIMILAR: c_int = 2;
pub const MPI_UNEQUAL: c_int = 3;
pub const MPI_GRAPH: c_int = 1;
pub const MPI_CART: c_int = 2;
pub const MPI_DIST_GRAPH: c_int = 3;
pub const MPI_THREAD_SINGLE: c_int = 0;
pub const MPI_THREAD_FUNNELED: c_int = 1;
pub const MPI_THREAD_SERIALIZED: c_int = 2;
pub const MPI_THREAD_MULTIPLE: c_int = 3;
pub const MPI_COMM_TYPE_SHARED: c_int = 1;
pub const MPI_COMM_TYPE_HW_GUIDED: c_int = 2;
pub const MPI_COMM_TYPE_HW_UNGUIDED: c_int = 3;
/// MPICH's split by a shared directory (`nbhd_common_dirname`).
pub const MPIX_COMM_TYPE_NEIGHBORHOOD: c_int = 4;
pub const MPI_ORDER_C: c_int = 56;
pub const MPI_ORDER_FORTRAN: c_int = 57;
pub const MPI_DISTRIBUTE_BLOCK: c_int = 121;
pub const MPI_DISTRIBUTE_CYCLIC: c_int = 122;
pub const MPI_DISTRIBUTE_NONE: c_int = 123;
pub const MPI_DISTRIBUTE_DFLT_DARG: c_int = -49767;
pub const MPI_BSEND_OVERHEAD: c_int = 96;
pub const MPI_MAX_PROCESSOR_NAME: usize = 128;
pub const MPI_MAX_ERROR_STRING: usize = 512;
pub const MPI_MAX_OBJECT_NAME: usize = 128;
pub const MPI_MAX_LIBRARY_VERSION_STRING: usize = 8192;
pub const MPI_MAX_INFO_KEY: usize = 255;
pub const MPI_MAX_INFO_VAL: usize = 1024;
pub const MPI_MAX_STRINGTAG_LEN: usize = 256;
pub const MPI_ERR_SESSION: c_int = 75;

pub const MPI_TAG_UB: c_int = 0x64400001;
pub const MPI_HOST: c_int = 0x64400003;
pub const MPI_IO: c_int = 0x64400005;
pub const MPI_WTIME_IS_GLOBAL: c_int = 0x64400007;
pub const MPI_UNIVERSE_SIZE: c_int = 0x64400009;
pub const MPI_LASTUSEDCODE: c_int = 0x6440000b;
pub const MPI_APPNUM: c_int = 0x6440000d;

pub const MPI_MAX: c_int = 0x58000001;
pub const MPI_MIN: c_int = 0x58000002;
pub const MPI_SUM: c_int = 0x58000003;
pub const MPI_PROD: c_int = 0x58000004;
pub const MPI_LAND: c_int = 0x58000005;
pub const MPI_BAND: c_int = 0x58000006;
pub const MPI_LOR: c_int = 0x58000007;
pub const MPI_BOR: c_int = 0x58000008;
pub const MPI_LXOR: c_int = 0x58000009;
pub const MPI_BXOR: c_int = 0x5800000a;
pub const MPI_MINLOC: c_int = 0x5800000b;
pub const MPI_MAXLOC: c_int = 0x5800000c;
pub const MPI_REPLACE: c_int = 0x5800000d;
pub const MPI_NO_OP: c_int = 0x5800000e;

pub const MPI_CHAR: c_int = 0x4c000101;
pub const MPI_SIGNED_CHAR: c_int = 0x4c000118;
pub const MPI_UNSIGNED_CHAR: c_int = 0x4c000102;
pub const MPI_BYTE: c_int = 0x4c00010d;
pub const MPI_SHORT: c_int = 0x4c000203;
pub const MPI_UNSIGNED_SHORT: c_int = 0x4c000204;
pub const MPI_INT: c_int = 0x4c000405;
pub const MPI_UNSIGNED: c_int = 0x4c000406;
pub const MPI_LONG: c_int = 0x4c000807;
pub const MPI_UNSIGNED_LONG: c_int = 0x4c000808;
pub const MPI_LONG_LONG: c_int = 0x4c000809;
pub const MPI_UNSIGNED_LONG_LONG: c_int = 0x4c000819;
pub const MPI_FLOAT: c_int = 0x4c00040a;
pub const MPI_DOUBLE: c_int = 0x4c00080b;
pub const MPI_LONG_DOUBLE: c_int = 0x4c00100c;
pub const MPI_PACKED: c_int = 0x4c00010f;
pub const MPI_CHARACTER: c_int = 0x4c00011a;
pub const MPI_C_BOOL: c_int = 0x4c00013f;
pub const MPI_INT8_T: c_int = 0x4c000137;
pub const MPI_INT16_T: c_int = 0x4c000238;
pub const MPI_INT32_T: c_int = 0x4c000439;
pub const MPI_INT64_T: c_int = 0x4c00083a;
pub const MPI_UINT8_T: c_int = 0x4c00013b;
pub const MPI_UINT16_T: c_int = 0x4c00023c;
pub const MPI_UINT32_T: c_int = 0x4c00043d;
pub const MPI_UINT64_T: c_int = 0x4c00083e;
pub const MPI_AINT: c_int = 0x4c000843;
pub const MPI_OFFSET: c_int = 0x4c000844;
pub const MPI_COUNT: c_int = 0x4c000845;
pub const MPI_WCHAR: c_int = 0x4c00040e;
pub const MPI_2INT: c_int = 0x4c000816;
pub const MPI_CXX_BOOL: c_int = 0x4c000133;
pub const MPI_C_FLOAT_COMPLEX: c_int = 0x4c000840;
pub const MPI_C_DOUBLE_COMPLEX: c_int = 0x4c001041;
pub const MPI_C_LONG_DOUBLE_COMPLEX: c_int = 0x4c002042;
pub const MPI_CXX_FLOAT_COMPLEX: c_int = 0x4c000834;
pub const MPI_CXX_DOUBLE_COMPLEX: c_int = 0x4c001035;
pub const MPI_CXX_LONG_DOUBLE_COMPLEX: c_int = 0x4c002036;
// Fortran's types, by the sizes MPICH gives them.
pub const MPI_COMPLEX: c_int = 0x4c00081e;
pub const MPI_DOUBLE_COMPLEX: c_int = 0x4c001022;
pub const MPI_LOGICAL: c_int = 0x4c00041d;
pub const MPI_INTEGER: c_int = 0x4c00041b;
pub const MPI_REAL16: c_int = 0x4c00102b;
pub const MPI_COMPLEX8: c_int = 0x4c000828;
pub const MPI_COMPLEX16: c_int = 0x4c00102a;
pub const MPI_COMPLEX32: c_int = 0x4c00202c;
pub const MPI_INTEGER1: c_int = 0x4c00012d;
pub const MPI_INTEGER2: c_int = 0x4c00022f;
pub const MPI_INTEGER4: c_int = 0x4c000430;
pub const MPI_INTEGER8: c_int = 0x4c000831;
pub const MPI_REAL: c_int = 0x4c00041c;
pub const MPI_REAL4: c_int = 0x4c000427;
pub const MPI_DOUBLE_PRECISION: c_int = 0x4c00081f;
pub const MPI_REAL8: c_int = 0x4c000829;
pub const MPI_2INTEGER: c_int = 0x4c000820;
pub const MPI_2REAL: c_int = 0x4c000821;
pub const MPI_2DOUBLE_PRECISION: c_int = 0x4c001023;
pub const MPI_FLOAT_INT: c_int = 0x8c000000u32 as c_int;
pub const MPI_DOUBLE_INT: c_int = 0x8c000001u32 as c_int;
pub const MPI_LONG_INT: c_int = 0x8c000002u32 as c_int;
pub const MPI_SHORT_INT: c_int = 0x8c000003u32 as c_int;
pub const MPI_LONG_DOUBLE_INT: c_int = 0x8c000004u32 as c_int;

/// `MPI_STATUS_IGNORE` and `MPI_STATUSES_IGNORE` are the address 1.
pub const STATUS_IGNORE: usize = 1;
/// `MPI_IN_PLACE` is the address -1.
pub const IN_PLACE: usize = usize::MAX;

/// Datatype combiners (`MPI_Type_get_envelope`), MPICH's values.
pub const MPI_COMBINER_NAMED: c_int = 1;
pub const MPI_COMBINER_DUP: c_int = 2;
pub const MPI_COMBINER_CONTIGUOUS: c_int = 3;
pub const MPI_COMBINER_VECTOR: c_int = 4;
pub const MPI_COMBINER_HVECTOR: c_int = 6;
pub const MPI_COMBINER_INDEXED: c_int = 7;
pub const MPI_COMBINER_HINDEXED: c_int = 9;
pub const MPI_COMBINER_INDEXED_BLOCK: c_int = 10;
pub const MPI_COMBINER_STRUCT: c_int = 12;
pub const MPI_COMBINER_SUBARRAY: c_int = 13;
pub const MPI_COMBINER_DARRAY: c_int = 14;
pub const MPI_COMBINER_F90_REAL: c_int = 15;
pub const MPI_COMBINER_F90_COMPLEX: c_int = 16;
pub const MPI_COMBINER_F90_INTEGER: c_int = 17;
pub const MPI_COMBINER_RESIZED: c_int = 18;
pub const MPI_COMBINER_HINDEXED_BLOCK: c_int = 19;
