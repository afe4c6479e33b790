// proofline's own kernels, written once on ec-gpu-gen's field and curve primitives, so that the
// CUDA and OpenCL backends run the same code (only ec-gpu-gen's lowest limb primitives differ
// per API). `{FR}` stands for the scalar field, `{G1}`/`{G2}` for the curves; `source.rs`
// substitutes ec-gpu-gen's names. Every kernel guards its index: launches round the thread
// count up to whole groups. GET_GLOBAL_ID() is only ever assigned on its own: under CUDA it
// expands to `blockIdx.x * blockDim.x + threadIdx.x`, without parentheses, so inside a larger
// expression it computes something else (a test checks this).

// x[i] = 0 for start <= i < n.
KERNEL void {FR}_fill_zero(GLOBAL {FR} *x, uint start, uint n) {
  const uint gid = GET_GLOBAL_ID();
  const uint i = start + gid;
  if (i < n) {
    const {FR} zero = {FR}_ZERO;
    x[i] = zero;
  }
}

// x[i] *= y[i].
KERNEL void {FR}_mul_assign(GLOBAL {FR} *x, GLOBAL {FR} *y, uint n) {
  const uint i = GET_GLOBAL_ID();
  if (i < n) x[i] = {FR}_mul(x[i], y[i]);
}

// x[i] = (x[i] - y[i]) * k: with k = 1 / Z(g), the division of a*b - c by the vanishing
// polynomial on the coset, where Z is the same constant at every point.
KERNEL void {FR}_sub_scaled(GLOBAL {FR} *x, GLOBAL {FR} *y, {FR} k, uint n) {
  const uint i = GET_GLOBAL_ID();
  if (i < n) x[i] = {FR}_mul({FR}_sub(x[i], y[i]), k);
}

// Montgomery form to canonical form, in place: the quotient's coefficients become MSM
// exponents without leaving the device.
KERNEL void {FR}_to_canonical(GLOBAL {FR} *x, uint n) {
  const uint i = GET_GLOBAL_ID();
  if (i < n) x[i] = {FR}_unmont(x[i]);
}
