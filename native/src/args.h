// Reading and checking N-API arguments. Every entry point goes through these before it
// touches memory, so that no call from JavaScript can read or write outside its arrays:
// each helper either fills its output and returns true, or throws a JS error that names the
// op and the offending sizes and returns false (the caller then returns NULL at once).
#ifndef OPENCLAW_ARGS_H
#define OPENCLAW_ARGS_H

#include <node_api.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define OP_MAX_ARGS 15

typedef struct {
  napi_env env;
  const char* op;
  napi_value argv[OP_MAX_ARGS];
} OpCall;

typedef struct {
  float* data;
  size_t length;
} F32Array;

typedef struct {
  double* data;
  size_t length;
} F64Array;

typedef struct {
  int32_t* data;
  size_t length;
} I32Array;

typedef struct {
  uint16_t* data;
  size_t length;
} U16Array;

typedef struct {
  int8_t* data;
  size_t length;
} I8Array;

// A Float32Array, or a Uint16Array of bf16 bits (is_bf16).
typedef struct {
  void* data;
  size_t length;
  bool is_bf16;
} Bf16Operand;

// Fetches the arguments; exactly `argc` (<= OP_MAX_ARGS) must have been passed.
// Registers release to run on this thread when its JS environment is torn down (a worker's exit):
// how the ops free the caches they keep per thread. Not a pthread key destructor: one segfaulted at
// every worker's exit (the addon's code may be gone by then). *hooked is the caller's per-thread
// flag; release clears it.
void op_release_at_env_exit(OpCall* call, bool* hooked, void (*release)(void* unused));

bool op_begin(napi_env env, napi_callback_info info, const char* op, size_t argc, OpCall* call);

bool op_bool(OpCall* call, size_t index, const char* name, bool* out);
// A JS number that is an integer in [min, INT32_MAX] (the BLAS index range).
bool op_size(OpCall* call, size_t index, const char* name, size_t min, size_t* out);
bool op_float(OpCall* call, size_t index, const char* name, float* out);
// A JS number kept in double, for scalars that are combined before they are rounded to float
// (1 - beta2 in float is 1.3e-5 off).
bool op_double(OpCall* call, size_t index, const char* name, double* out);
bool op_f32_array(OpCall* call, size_t index, const char* name, F32Array* out);
bool op_f64_array(OpCall* call, size_t index, const char* name, F64Array* out);
// A Float32Array, or null: then data is NULL and length 0.
bool op_f32_array_or_null(OpCall* call, size_t index, const char* name, F32Array* out);
bool op_i32_array(OpCall* call, size_t index, const char* name, I32Array* out);
bool op_u16_array(OpCall* call, size_t index, const char* name, U16Array* out);
// A Uint16Array, or null: then data is NULL and length 0.
bool op_u16_array_or_null(OpCall* call, size_t index, const char* name, U16Array* out);
bool op_i8_array(OpCall* call, size_t index, const char* name, I8Array* out);
bool op_bf16_operand(OpCall* call, size_t index, const char* name, Bf16Operand* out);

// `length` must cover `rows` rows of `cols` elements, `stride` apart, with stride >=
// max(1, cols) as BLAS requires. The last row may end at the end of the array, so that a
// view starting at a column offset of a larger matrix is accepted. `dims` names rows x cols
// in the caller's terms (e.g. "K x M"), for the message.
bool op_check_matrix(OpCall* call, const char* name, size_t length, size_t rows, size_t cols,
                     const char* dims, size_t stride, const char* stride_name);
// `length` must be at least a * b * c (`formula` says what that product is, for the message).
bool op_check_length(OpCall* call, const char* name, size_t length, size_t a, size_t b, size_t c,
                     const char* formula);
// Throws a TypeError about an argument's type; printf-style detail.
void op_throw_type(OpCall* call, const char* format, ...) __attribute__((format(printf, 2, 3)));
// Throws a RangeError about sizes; printf-style detail.
void op_throw_size(OpCall* call, const char* format, ...) __attribute__((format(printf, 2, 3)));
// Throws a RangeError about a scalar argument's value (e.g. a learning rate that is NaN).
void op_throw_value(OpCall* call, const char* format, ...) __attribute__((format(printf, 2, 3)));

#endif
