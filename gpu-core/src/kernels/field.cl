// Comparison, equality, addition, subtraction and doubling of the prime field `{T}` ({N}
// 32-bit limbs), without branches, in place of ec-gpu-gen's: those compare limb by limb with
// early returns and add or subtract the modulus behind a branch, which a warp's threads take
// apart (an XYZZ addition makes seven such calls; an NTT butterfly two). Here the borrow of one
// subtraction decides, as a mask: on CUDA one carry chain (`{T}_pl_sub_mask`), elsewhere the
// same arithmetic in C, so that POCL checks every function but that chain. ec-gpu-gen's
// definitions are taken out of its field text (source.rs), which declares these instead.

// r = a - b; the borrow out as a mask: all ones when a < b, else zero.
DEVICE uint {T}_pl_sub_mask({T} *r, {T} a, {T} b) {
#ifdef CUDA
  uint m;
  *r = a;
  {SUB_CHAIN}
  return m;
#else
  uint borrow = 0;
  for (uint i = 0; i < {N}; i++) {
    const uint d = a.val[i] - b.val[i];
    const uint out = (a.val[i] < b.val[i]) | (d < borrow);
    r->val[i] = d - borrow;
    borrow = out;
  }
  return 0u - borrow;
#endif
}

// r - p unless that borrows: r reduced once (r < 2p).
DEVICE {T} {T}_pl_reduce_once({T} r) {
  {T} t;
  const uint m = {T}_pl_sub_mask(&t, r, {T}_P);
  for (uint i = 0; i < {N}; i++) t.val[i] = (r.val[i] & m) | (t.val[i] & ~m);
  return t;
}

DEVICE bool {T}_gte({T} a, {T} b) {
  {T} t;
  return {T}_pl_sub_mask(&t, a, b) == 0;
}

DEVICE bool {T}_eq({T} a, {T} b) {
  uint d = 0;
  for (uint i = 0; i < {N}; i++) d |= a.val[i] ^ b.val[i];
  return d == 0;
}

// a - b, plus p where that borrowed.
DEVICE {T} {T}_sub({T} a, {T} b) {
  {T} r;
  const uint m = {T}_pl_sub_mask(&r, a, b);
  {T} q;
  for (uint i = 0; i < {N}; i++) q.val[i] = {T}_P.val[i] & m;
  return {T}_add_(r, q);
}

DEVICE {T} {T}_add({T} a, {T} b) {
  return {T}_pl_reduce_once({T}_add_(a, b));
}

DEVICE {T} {T}_double({T} a) {
  return {T}_pl_reduce_once({T}_add_(a, a));
}
