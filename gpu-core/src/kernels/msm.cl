// MSM kernels of one curve, `{P}` (affine bases, jacobian sums; identity bases are stored as
// all-zero affine points, as blst does, and skipped here).

DEVICE bool {P}_is_identity(GLOBAL {P}_affine *b) {
  GLOBAL uint *w = (GLOBAL uint *)b;
  for (uint k = 0; k < sizeof({P}_affine) / sizeof(uint); k++) {
    if (w[k] != 0) return false;
  }
  return true;
}

// The sum of the bases whose scalar is one: thread t adds bases[idx[i]] for i in
// [t * per, (t + 1) * per) and writes its partial sum to results[t] (the host adds the
// partials).
KERNEL void {P}_sum_indexed(GLOBAL {P}_affine *bases, GLOBAL uint *idx, uint n, uint per,
                            uint threads, GLOBAL {P}_jacobian *results) {
  const uint t = GET_GLOBAL_ID();
  if (t >= threads) return;
  {P}_jacobian acc = {P}_ZERO;
  const uint start = t * per;
  const uint end = min(start + per, n);
  for (uint i = start; i < end; i++) {
    GLOBAL {P}_affine *b = bases + idx[i];
    if (!{P}_is_identity(b)) acc = {P}_add_mixed(acc, *b);
  }
  results[t] = acc;
}

// Bucket MSM: thread gid takes the group gid / num_windows of the n terms and the window
// gid % num_windows of the exponents' bits (from the most significant end), fills its own
// 2^window_size - 1 buckets and sums them by parts into results[gid]; the host combines the
// windows. Term i's exponent is exps[exp_offset + i]. With `gather`, term i uses bases[idx[i]] (sparse queries: zeros, ones and unused
// variables filtered on the host); without, bases[i] (the dense H query).
KERNEL void {P}_msm(GLOBAL {P}_affine *bases, GLOBAL uint *idx, uint gather,
                    GLOBAL {FR} *exps, uint exp_offset, uint n, GLOBAL {P}_jacobian *buckets,
                    GLOBAL {P}_jacobian *results, uint num_groups, uint num_windows,
                    uint window_size) {
  const uint gid = GET_GLOBAL_ID();
  if (gid >= num_windows * num_groups) return;
  const uint bucket_len = (1 << window_size) - 1;
  buckets += bucket_len * gid;
  const {P}_jacobian zero = {P}_ZERO;
  for (uint i = 0; i < bucket_len; i++) buckets[i] = zero;

  const uint len = (n + num_groups - 1) / num_groups;
  const uint nstart = len * (gid / num_windows);
  const uint nend = min(nstart + len, n);
  const uint bits = (gid % num_windows) * window_size;
  const uint w = min(window_size, (uint)({FR}_BITS - bits));

  for (uint i = nstart; i < nend; i++) {
    const uint ind = {FR}_get_bits(exps[exp_offset + i], bits, w);
    if (ind != 0) {
      GLOBAL {P}_affine *b = bases + (gather ? idx[i] : i);
      if (!{P}_is_identity(b)) buckets[ind - 1] = {P}_add_mixed(buckets[ind - 1], *b);
    }
  }

  {P}_jacobian acc = zero;
  {P}_jacobian res = zero;
  for (int j = (int)bucket_len - 1; j >= 0; j--) {
    acc = {P}_add(acc, buckets[j]);
    res = {P}_add(res, acc);
  }
  results[gid] = res;
}
