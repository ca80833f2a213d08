#include "args.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>

#define HINT_SIZES "nothing was computed; check the caller's sizes and strides against its arrays"
#define HINT_VALUES "nothing was computed; check the caller's arguments against src/engine/local/kernels/kernels.ts"
#define HINT_SIGNATURE                                                                     \
  "check the call against src/engine/local/kernels/kernels.ts; if openclaw-rl was just " \
  "upgraded, rebuild the addon with `npm rebuild openclaw-rl`"

static void throw_formatted(OpCall* call, bool is_type_error, const char* hint, const char* format,
                            va_list args) {
  char detail[320];
  char message[640];
  vsnprintf(detail, sizeof detail, format, args);
  snprintf(message, sizeof message, "openclaw_native.%s: %s (%s)", call->op, detail, hint);
  if (is_type_error)
    napi_throw_type_error(call->env, NULL, message);
  else
    napi_throw_range_error(call->env, NULL, message);
}

void op_throw_type(OpCall* call, const char* format, ...) {
  va_list args;
  va_start(args, format);
  throw_formatted(call, true, HINT_SIGNATURE, format, args);
  va_end(args);
}

void op_throw_size(OpCall* call, const char* format, ...) {
  va_list args;
  va_start(args, format);
  throw_formatted(call, false, HINT_SIZES, format, args);
  va_end(args);
}

void op_throw_value(OpCall* call, const char* format, ...) {
  va_list args;
  va_start(args, format);
  throw_formatted(call, false, HINT_VALUES, format, args);
  va_end(args);
}

void op_release_at_env_exit(OpCall* call, bool* hooked, void (*release)(void* unused)) {
  if (!*hooked && napi_add_env_cleanup_hook(call->env, release, NULL) == napi_ok) *hooked = true;
}

bool op_begin(napi_env env, napi_callback_info info, const char* op, size_t argc, OpCall* call) {
  call->env = env;
  call->op = op;
  if (argc > OP_MAX_ARGS) {
    // argv has room for OP_MAX_ARGS values: reading more would read past it (raise OP_MAX_ARGS).
    op_throw_type(call, "takes %zu arguments, more than the addon's OP_MAX_ARGS (%d)", argc, OP_MAX_ARGS);
    return false;
  }
  size_t passed = OP_MAX_ARGS;
  if (napi_get_cb_info(env, info, &passed, call->argv, NULL, NULL) != napi_ok) {
    op_throw_type(call, "could not read the arguments");
    return false;
  }
  if (passed != argc) {
    op_throw_type(call, "expected %zu arguments, got %zu", argc, passed);
    return false;
  }
  return true;
}

static bool is_type(OpCall* call, size_t index, napi_valuetype expected) {
  napi_valuetype actual;
  return napi_typeof(call->env, call->argv[index], &actual) == napi_ok && actual == expected;
}

bool op_bool(OpCall* call, size_t index, const char* name, bool* out) {
  if (!is_type(call, index, napi_boolean) || napi_get_value_bool(call->env, call->argv[index], out) != napi_ok) {
    op_throw_type(call, "argument %zu (%s) must be a boolean", index, name);
    return false;
  }
  return true;
}

static bool get_number(OpCall* call, size_t index, const char* name, double* out) {
  if (!is_type(call, index, napi_number) || napi_get_value_double(call->env, call->argv[index], out) != napi_ok) {
    op_throw_type(call, "argument %zu (%s) must be a number", index, name);
    return false;
  }
  return true;
}

bool op_size(OpCall* call, size_t index, const char* name, size_t min, size_t* out) {
  double value;
  if (!get_number(call, index, name, &value)) return false;
  if (!(value >= (double)min && value <= (double)INT32_MAX && value == floor(value))) {
    op_throw_size(call, "%s = %g must be an integer in [%zu, %d]", name, value, min, INT32_MAX);
    return false;
  }
  *out = (size_t)value;
  return true;
}

bool op_float(OpCall* call, size_t index, const char* name, float* out) {
  double value;
  if (!get_number(call, index, name, &value)) return false;
  *out = (float)value;
  return true;
}

bool op_double(OpCall* call, size_t index, const char* name, double* out) {
  return get_number(call, index, name, out);
}

static bool get_typed_array(OpCall* call, size_t index, const char* name, napi_typedarray_type expected,
                            const char* expected_name, void** data, size_t* length) {
  bool is_typed_array = false;
  napi_typedarray_type type;
  napi_value buffer;
  size_t byte_offset;
  if (napi_is_typedarray(call->env, call->argv[index], &is_typed_array) != napi_ok || !is_typed_array ||
      napi_get_typedarray_info(call->env, call->argv[index], &type, length, data, &buffer, &byte_offset) != napi_ok ||
      type != expected) {
    op_throw_type(call, "argument %zu (%s) must be a %s", index, name, expected_name);
    return false;
  }
  return true;
}

bool op_f32_array(OpCall* call, size_t index, const char* name, F32Array* out) {
  void* data;
  if (!get_typed_array(call, index, name, napi_float32_array, "Float32Array", &data, &out->length)) return false;
  out->data = data;
  return true;
}

bool op_f64_array(OpCall* call, size_t index, const char* name, F64Array* out) {
  void* data;
  if (!get_typed_array(call, index, name, napi_float64_array, "Float64Array", &data, &out->length)) return false;
  out->data = data;
  return true;
}

// A typed array of `type`, or null (data NULL, length 0).
static bool typed_array_or_null(OpCall* call, size_t index, const char* name, napi_typedarray_type type,
                                const char* expected, void** data, size_t* length) {
  if (is_type(call, index, napi_null)) {
    *data = NULL;
    *length = 0;
    return true;
  }
  return get_typed_array(call, index, name, type, expected, data, length);
}

bool op_f32_array_or_null(OpCall* call, size_t index, const char* name, F32Array* out) {
  void* data;
  if (!typed_array_or_null(call, index, name, napi_float32_array, "Float32Array or null", &data, &out->length))
    return false;
  out->data = data;
  return true;
}

bool op_u16_array_or_null(OpCall* call, size_t index, const char* name, U16Array* out) {
  void* data;
  if (!typed_array_or_null(call, index, name, napi_uint16_array, "Uint16Array or null", &data, &out->length))
    return false;
  out->data = data;
  return true;
}

bool op_i32_array(OpCall* call, size_t index, const char* name, I32Array* out) {
  void* data;
  if (!get_typed_array(call, index, name, napi_int32_array, "Int32Array", &data, &out->length)) return false;
  out->data = data;
  return true;
}

bool op_u16_array(OpCall* call, size_t index, const char* name, U16Array* out) {
  void* data;
  if (!get_typed_array(call, index, name, napi_uint16_array, "Uint16Array", &data, &out->length)) return false;
  out->data = data;
  return true;
}

bool op_i8_array(OpCall* call, size_t index, const char* name, I8Array* out) {
  void* data;
  if (!get_typed_array(call, index, name, napi_int8_array, "Int8Array", &data, &out->length)) return false;
  out->data = data;
  return true;
}

bool op_bf16_operand(OpCall* call, size_t index, const char* name, Bf16Operand* out) {
  bool is_typed_array = false;
  napi_typedarray_type type;
  napi_value buffer;
  size_t byte_offset;
  if (napi_is_typedarray(call->env, call->argv[index], &is_typed_array) != napi_ok || !is_typed_array ||
      napi_get_typedarray_info(call->env, call->argv[index], &type, &out->length, &out->data, &buffer,
                               &byte_offset) != napi_ok ||
      (type != napi_float32_array && type != napi_uint16_array)) {
    op_throw_type(call, "argument %zu (%s) must be a Float32Array or a Uint16Array of bf16 bits", index, name);
    return false;
  }
  out->is_bf16 = type == napi_uint16_array;
  return true;
}

bool op_check_matrix(OpCall* call, const char* name, size_t length, size_t rows, size_t cols,
                     const char* dims, size_t stride, const char* stride_name) {
  if (stride < cols || stride < 1) {
    op_throw_size(call, "%s = %zu must be >= max(1, %zu), the columns of %s (%s = %zu x %zu)", stride_name, stride,
                  cols, name, dims, rows, cols);
    return false;
  }
  // Both factors are <= INT32_MAX, so the product cannot overflow 64 bits.
  uint64_t needed = rows == 0 || cols == 0 ? 0 : (uint64_t)(rows - 1) * stride + cols;
  if ((uint64_t)length < needed) {
    op_throw_size(call, "%s has %zu elements but needs %llu for %s = %zu x %zu with %s = %zu", name, length,
                  (unsigned long long)needed, dims, rows, cols, stride_name, stride);
    return false;
  }
  return true;
}

bool op_check_length(OpCall* call, const char* name, size_t length, size_t a, size_t b, size_t c,
                     const char* formula) {
  uint64_t ab, needed;
  if (__builtin_mul_overflow((uint64_t)a, (uint64_t)b, &ab) || __builtin_mul_overflow(ab, (uint64_t)c, &needed)) {
    op_throw_size(call, "%s would need %s = %zu*%zu*%zu elements, which overflows", name, formula, a, b, c);
    return false;
  }
  if ((uint64_t)length < needed) {
    op_throw_size(call, "%s has %zu elements but needs %s = %llu", name, length, formula,
                  (unsigned long long)needed);
    return false;
  }
  return true;
}
