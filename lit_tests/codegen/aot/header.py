# RUN: stageflow compile %s:predict --arg "f32[?,16]" -o %t.so --header %t.h
# RUN: filecheck %s --input-file %t.h
# RUN: stageflow compile %s:predict --arg "f32[?,16]" --no-freeze --name net -o %t.o --header %t2.h
# RUN: filecheck %s --check-prefix=STATE --input-file %t2.h
"""The C header of an ahead-of-time library documents its ABI: inputs, outputs, which dims
the caller passes, the error codes; with variables kept as state, the state functions."""

import numpy as np

import stageflow as sf

w = sf.Variable(np.linspace(-1.0, 1.0, 16 * 4, dtype=np.float32).reshape(16, 4), name="w")


def predict(x):
    return sf.nn.softmax(sf.matmul(x, w)), sf.reduce_max(x, axis=1)


# CHECK:      Inputs (`inputs[i]`: a pointer to C-contiguous, aligned data):
# CHECK-NEXT:   0: float [?, 16]
# CHECK:      Outputs
# CHECK:        0: float [?, 4]
# CHECK-NEXT:   1: float [?]
# CHECK-NEXT: dims: the unknown (?) input dims, in order: input 0 dim 0.
# CHECK:        1 + i          input i has dims that do not fit its type
# CHECK:        1000 + k       op k of the function refused its operands
# CHECK:      CBLAS of NumPy's bundled OpenBLAS
# CHECK-NOT:  _state
# CHECK:      int32_t predict(const void *const *inputs, const int64_t *dims, void *const
# CHECK:      int32_t predict_output_dims(const int64_t *dims, int64_t *out_dims);

# STATE:      Variables (the state): created with their values at compile time; every call
# STATE-NEXT: reads them and replaces those it assigns (only when the call succeeds).
# STATE:        0: w  float [16, 4]
# STATE:      typedef struct net_state net_state;
# STATE-NEXT: net_state *net_state_new(void);
# STATE-NEXT: void net_state_free(net_state *state);
# STATE:      void *net_state_variable(net_state *state, int32_t index);
# STATE:      int32_t net(net_state *state, const void *const *inputs, const int64_t *dims,
