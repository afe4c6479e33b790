// The sorted-bucket MSM (Pippenger with signed windows), all windows at once:
//   1. pl_digits: each term's signed (Booth) digit in every window of c bits: its bucket
//      (|digit|, 0 for none) and its index with the digit's sign in the top bit; bucket sizes
//      counted (atomically) per window;
//   2. pl_scan_*: the counts become bucket offsets (an exclusive scan over every window's
//      buckets at once);
//   3. pl_scatter: terms sorted by bucket (a counting sort: each term takes the next slot of
//      its bucket), with their bucket beside them;
//   4. {P}_pl_runs: the sorted entries cut in equal runs of `per`, one thread per run (so a
//      bucket holding many terms, as a top window's few buckets or equal scalars make, is
//      shared among threads), adding in XYZZ coordinates (the cheapest mixed addition) in one
//      flat loop, so that a warp's threads add in step wherever their buckets end: a bucket
//      wholly inside a run is stored as the run's part of it, the parts of buckets crossing a
//      run's ends are left as the run's head and tail; {P}_pl_fixup then adds, one thread per
//      bucket, its part or the parts of the runs it spans (long spans by groups of 64 and 4096
//      runs summed beforehand) to the bucket's sum;
//   5. {P}_pl_reduce: one thread per segment of a window's buckets computes sum(weight * bucket)
//      of the segment; {P}_pl_sum adds each window's segments (in passes of groups); the host
//      combines the windows.
// The curve-independent part is defined once (guarded); the rest once per curve, `{P}` the
// curve and `{F}` its base field. Exponents are canonical little-endian 256-bit numbers.

#ifndef PL_COMMON
#define PL_COMMON

#ifdef CUDA
#define PL_ATOMIC_INC(p) atomicAdd((p), 1u)
#define PL_BOUNDS(threads, groups) __launch_bounds__(threads, groups)
#else
#define PL_ATOMIC_INC(p) atomic_inc(p)
#define PL_BOUNDS(threads, groups)
#endif

// Bits [s, s + c) of a 256-bit little-endian number (c < 32; zero beyond bit 255).
DEVICE uint pl_bits(GLOBAL uint *e, uint s, uint c) {
  if (s >= 256) return 0;
  const uint k = s / 32;
  ulong v = e[k];
  if (k < 7) v |= ((ulong)e[k + 1]) << 32;
  return (uint)(v >> (s % 32)) & ((1u << c) - 1);
}

// The Booth digit of window w (c bits): -2^(c-1) b[wc+c-1] + sum_{k<c-1} 2^k b[wc+k] + b[wc-1],
// in [-2^(c-1), 2^(c-1)]. The digits of windows 0..ceil(256/c) sum (times 2^(wc)) to any
// exponent below 2^255.
DEVICE int pl_digit(GLOBAL uint *e, uint w, uint c) {
  const uint s = w * c;
  const uint v = pl_bits(e, s, c);
  const uint prev = s == 0 ? 0 : pl_bits(e, s - 1, 1);
  const uint top = 1u << (c - 1);
  return (int)((v & (top - 1)) + prev) - (int)(v & top);
}

// x[i] = 0 for i < n.
KERNEL void pl_zero(GLOBAL uint *x, uint n) {
  const uint i = GET_GLOBAL_ID();
  if (i < n) x[i] = 0;
}

// Term i of n, every window: keys[w n + i] = w (nb + 1) + |digit| (w (nb + 1) for none: bucket
// 0 of each window is never used), vals[w n + i] = i | sign << 31; counts[key] += 1 for the
// used ones. `exps` holds the terms' exponents from `exp_offset` on.
KERNEL void pl_digits(GLOBAL uint *exps, uint exp_offset, uint n, uint windows, uint c,
                      GLOBAL uint *keys, GLOBAL uint *vals, GLOBAL uint *counts) {
  const uint i = GET_GLOBAL_ID();
  if (i >= n) return;
  GLOBAL uint *e = exps + 8 * (ulong)(exp_offset + i);
  const uint nb = 1u << (c - 1);
  for (uint w = 0; w < windows; w++) {
    const int d = pl_digit(e, w, c);
    const uint k = w * (nb + 1) + (uint)(d < 0 ? -d : d);
    keys[w * n + i] = k;
    vals[w * n + i] = i | (d < 0 ? 0x80000000u : 0u);
    if (d != 0) PL_ATOMIC_INC(&counts[k]);
  }
}

// Exclusive scan of counts[0..n) in blocks of `per` (in place); block b's total into sums[b].
KERNEL void pl_scan_blocks(GLOBAL uint *counts, uint n, uint per, uint blocks,
                           GLOBAL uint *sums) {
  const uint b = GET_GLOBAL_ID();
  if (b >= blocks) return;
  const uint start = b * per;
  const uint end = min(start + per, n);
  uint acc = 0;
  for (uint i = start; i < end; i++) {
    const uint x = counts[i];
    counts[i] = acc;
    acc += x;
  }
  sums[b] = acc;
}

// Exclusive scan of the block totals (one thread).
KERNEL void pl_scan_sums(GLOBAL uint *sums, uint blocks) {
  const uint t = GET_GLOBAL_ID();
  if (t != 0) return;
  uint acc = 0;
  for (uint b = 0; b < blocks; b++) {
    const uint x = sums[b];
    sums[b] = acc;
    acc += x;
  }
}

// counts[i] += the offset of its block.
KERNEL void pl_scan_add(GLOBAL uint *counts, uint n, uint per, GLOBAL uint *sums) {
  const uint i = GET_GLOBAL_ID();
  if (i < n) counts[i] += sums[i / per];
}

// The counting sort's scatter: each used entry takes the next slot of its bucket (its value
// in sorted, its key in skeys). Afterwards cursor[k] is the end of bucket k, so bucket k
// (k >= 1 in its window) spans [cursor[k - 1], cursor[k]), and the last count's end is the
// number of used entries.
KERNEL void pl_scatter(GLOBAL uint *keys, GLOBAL uint *vals, uint entries, uint nb,
                       GLOBAL uint *cursor, GLOBAL uint *sorted, GLOBAL uint *skeys) {
  const uint j = GET_GLOBAL_ID();
  if (j >= entries) return;
  const uint k = keys[j];
  if (k % (nb + 1) == 0) return;
  const uint at = PL_ATOMIC_INC(&cursor[k]);
  sorted[at] = vals[j];
  skeys[at] = k;
}

#endif

// A point in XYZZ coordinates (x = X / ZZ, y = Y / ZZZ, ZZ^3 = ZZZ^2; ZZ = 0 is the identity):
// a mixed addition costs 8 multiplications and 2 squarings, against 7 and 4 in jacobian ones.
typedef struct {
  {F} x;
  {F} y;
  {F} zz;
  {F} zzz;
} {P}_xyzz;

// 2 p for an affine p (mdbl-2008-s; no point of order 2 on the prime-order groups).
DEVICE {P}_xyzz {P}_xyzz_double_affine({P}_affine p) {
  const {F} u = {F}_double(p.y);
  const {F} v = {F}_sqr(u);
  const {F} w = {F}_mul(u, v);
  const {F} s = {F}_mul(p.x, v);
  const {F} xx = {F}_sqr(p.x);
  const {F} m = {F}_add({F}_double(xx), xx);
  {P}_xyzz r;
  r.x = {F}_sub({F}_sqr(m), {F}_double(s));
  r.y = {F}_sub({F}_mul(m, {F}_sub(s, r.x)), {F}_mul(w, p.y));
  r.zz = v;
  r.zzz = w;
  return r;
}

// a + p for an affine p that is not the identity (madd-2008-s).
DEVICE {P}_xyzz {P}_xyzz_add_affine({P}_xyzz a, {P}_affine p) {
  const {F} zero = {F}_ZERO;
  if ({F}_eq(a.zz, zero)) {
    const {F} one = {F}_ONE;
    a.x = p.x;
    a.y = p.y;
    a.zz = one;
    a.zzz = one;
    return a;
  }
  const {F} u2 = {F}_mul(p.x, a.zz);
  const {F} s2 = {F}_mul(p.y, a.zzz);
  const {F} h = {F}_sub(u2, a.x);
  const {F} r = {F}_sub(s2, a.y);
  if ({F}_eq(h, zero)) {
    if ({F}_eq(r, zero)) return {P}_xyzz_double_affine(p);
    a.zz = zero;
    a.zzz = zero;
    return a;
  }
  const {F} pp = {F}_sqr(h);
  const {F} ppp = {F}_mul(h, pp);
  const {F} q = {F}_mul(a.x, pp);
  const {F} x3 = {F}_sub({F}_sub({F}_sqr(r), ppp), {F}_double(q));
  a.y = {F}_sub({F}_mul(r, {F}_sub(q, x3)), {F}_mul(a.y, ppp));
  a.x = x3;
  a.zz = {F}_mul(a.zz, pp);
  a.zzz = {F}_mul(a.zzz, ppp);
  return a;
}

// The same point in jacobian coordinates: Z = ZZ ZZZ, so X = X ZZ ZZZ^2 and Y = Y ZZZ^4.
DEVICE {P}_jacobian {P}_xyzz_to_jacobian({P}_xyzz a) {
  const {F} zero = {F}_ZERO;
  if ({F}_eq(a.zz, zero)) {
    const {P}_jacobian z = {P}_ZERO;
    return z;
  }
  const {F} t = {F}_sqr(a.zzz);
  {P}_jacobian r;
  r.x = {F}_mul({F}_mul(a.x, a.zz), t);
  r.y = {F}_mul(a.y, {F}_sqr(t));
  r.z = {F}_mul(a.zz, a.zzz);
  return r;
}

// Entry j's base (term `first + (v & 0x7fffffff)` of the sorted value v, through idx with
// `gather`), negated for a negative digit; `*skip` is set for an identity base.
DEVICE {P}_affine {P}_pl_base(GLOBAL {P}_affine *bases, GLOBAL uint *idx, uint gather,
                              uint first, uint v, bool *skip) {
  const uint term = first + (v & 0x7fffffffu);
  GLOBAL {P}_affine *b = bases + (gather ? idx[term] : term);
  *skip = {P}_is_identity(b);
  {P}_affine p = *b;
  if (v >> 31) {
    const {F} fzero = {F}_ZERO;
    p.y = {F}_sub(fzero, p.y);
  }
  return p;
}

// Run r: sorted entries [r per, (r + 1) per) of the used ones (cursor[last] of them), each
// base as {P}_pl_base reads it where it is added (reading the next one ahead kept a second point
// live: G2 2^24 439 against 420 ms, G1 150-153 against 148 ms on the H200,
// docs/design-decisions.md#msm),
// added in one flat loop in XYZZ coordinates. Where a bucket ends, its sum is only stored (converting
// it and adding it into the bucket sums is {P}_pl_fixup's, one thread per bucket): a bucket
// wholly in the run to parts[w nb + digit - 1]; the part of a bucket that started before the
// run to hx[r], the part of one that goes on after it to tx[r] (the run's head and tail, zero
// when there is none; {P}_pl_edges makes them jacobian).
#define {P}_PL_RUNS_PARAMS                                                                \
  GLOBAL {P}_affine *bases, GLOBAL uint *idx, uint gather, GLOBAL uint *sorted,              \
      GLOBAL uint *skeys, GLOBAL uint *cursor, uint last, uint per, uint runs, uint nb,       \
      uint first, GLOBAL {P}_xyzz *parts, GLOBAL {P}_xyzz *hx, GLOBAL {P}_xyzz *tx
#define {P}_PL_RUNS_ARGS                                                                  \
  bases, idx, gather, sorted, skeys, cursor, last, per, runs, nb, first, parts, hx, tx

// The identity in XYZZ coordinates.
DEVICE {P}_xyzz {P}_xyzz_zero() {
  const {F} fzero = {F}_ZERO;
  {P}_xyzz z;
  z.x = fzero;
  z.y = fzero;
  z.zz = fzero;
  z.zzz = fzero;
  return z;
}

// Stores the sum `acc` of bucket k's entries [max(start, lo), min(stop, hi)) of run r.
DEVICE void {P}_pl_emit({P}_xyzz acc, uint r, uint lo, uint hi, uint start, uint stop,
                        uint k, uint nb, GLOBAL {P}_xyzz *parts, GLOBAL {P}_xyzz *hx,
                        GLOBAL {P}_xyzz *tx) {
  if (start < lo) {
    hx[r] = acc;
  } else if (stop > hi) {
    tx[r] = acc;
  } else {
    parts[(k / (nb + 1)) * nb + k % (nb + 1) - 1] = acc;
  }
}

// One flat loop over the run's entries, so that a warp's threads add in step wherever their
// buckets end (a loop per bucket, its threads drifting apart at the buckets' ends, was 1.2-2.2x
// slower on the H200, docs/design-decisions.md#msm).
DEVICE void {P}_pl_runs_at(uint r, {P}_PL_RUNS_PARAMS) {
  if (r >= runs) return;
  const {P}_xyzz zero = {P}_xyzz_zero();
  hx[r] = zero;
  tx[r] = zero;
  const uint used = cursor[last];
  const uint lo = r * per;
  if (lo >= used) return;
  const uint hi = min(lo + per, used);
  uint k = skeys[lo];
  uint start = cursor[k - 1];
  uint stop = cursor[k];
  {P}_xyzz acc = zero;
  for (uint j = lo; j < hi; j++) {
    bool skip_p;
    const {P}_affine p = {P}_pl_base(bases, idx, gather, first, sorted[j], &skip_p);
    if (!skip_p) acc = {P}_xyzz_add_affine(acc, p);
    if (j + 1 == stop || j + 1 == hi) {
      {P}_pl_emit(acc, r, lo, hi, start, stop, k, nb, parts, hx, tx);
      acc = zero;
      if (j + 1 < hi) {
        k = skeys[j + 1];
        start = cursor[k - 1];
        stop = cursor[k];
      }
    }
  }
}

// The bounds placeholder (here and on the fixup and sums) is, for G1 on CUDA, at least 8
// groups of 64 threads per multiprocessor (128 registers a thread instead of 180-200: the runs
// 3-5% faster on the H200, the fixup 26%); for G2 nothing (its points need more registers).
// The reduction has none: bounded, it took 24.1 ms at G1 2^24 against 22.6 (`ncu`, docs/design-decisions.md#msm).
KERNEL void {BOUNDS} {P}_pl_runs({P}_PL_RUNS_PARAMS) {
  const uint r = GET_GLOBAL_ID();
  {P}_pl_runs_at(r, {P}_PL_RUNS_ARGS);
}

// The runs' heads and tails in jacobian coordinates, one thread per run.
KERNEL void {P}_pl_edges(GLOBAL {P}_xyzz *hx, GLOBAL {P}_xyzz *tx, uint runs,
                         GLOBAL {P}_jacobian *heads, GLOBAL {P}_jacobian *tails) {
  const uint r = GET_GLOBAL_ID();
  if (r >= runs) return;
  heads[r] = {P}_xyzz_to_jacobian(hx[r]);
  tails[r] = {P}_xyzz_to_jacobian(tx[r]);
}

// Bucket t (t = w nb + digit - 1) of this chunk's entries, added to sums[t] (stored there, the
// identity for an empty bucket, when `first`: the first chunk's fixup sets every bucket, so
// the sums need no zeroing beforehand): a bucket wholly
// inside one run is that run's part (parts[t]); one that crosses runs is the tail of the run
// r0 it starts in and the heads of the runs r0 + 1..=r1 it goes on into. Aligned groups of 64
// and 4096 runs wholly inside the span are taken from heads64 and heads4096 (the heads summed
// by {P}_pl_sum), so a crowded bucket (a narrow top window, equal scalars) costs a few hundred
// additions, not one per run.
KERNEL void {BOUNDS} {P}_pl_fixup(GLOBAL uint *cursor, uint per, uint nb, uint total,
                                  GLOBAL {P}_jacobian *sums, GLOBAL {P}_xyzz *parts,
                                  GLOBAL {P}_jacobian *heads, GLOBAL {P}_jacobian *tails,
                                  GLOBAL {P}_jacobian *heads64,
                                  GLOBAL {P}_jacobian *heads4096, uint first) {
  const uint t = GET_GLOBAL_ID();
  if (t >= total) return;
  const uint k = (t / nb) * (nb + 1) + t % nb + 1;
  const uint start = cursor[k - 1];
  const uint stop = cursor[k];
  if (stop <= start) {
    if (first) sums[t] = {P}_ZERO;
    return;
  }
  const uint r0 = start / per;
  const uint r1 = (stop - 1) / per;
  if (r0 == r1) {
    const {P}_jacobian part = {P}_xyzz_to_jacobian(parts[t]);
    sums[t] = first ? part : {P}_add(sums[t], part);
    return;
  }
  {P}_jacobian acc = tails[r0];
  uint r = r0 + 1;
  while (r <= r1) {
    if ((r & 4095) == 0 && r1 - r >= 4095) {
      acc = {P}_add(acc, heads4096[r >> 12]);
      r += 4096;
    } else if ((r & 63) == 0 && r1 - r >= 63) {
      acc = {P}_add(acc, heads64[r >> 6]);
      r += 64;
    } else {
      acc = {P}_add(acc, heads[r]);
      r += 1;
    }
  }
  sums[t] = first ? acc : {P}_add(sums[t], acc);
}

// Segment s of window w (t = w segs + s) of the window's nb bucket sums (bucket j weighs
// j + 1): out[t] = sum over the segment's buckets of weight * sum, by a running sum from the
// top plus the segment's offset times its total.
KERNEL void {P}_pl_reduce(GLOBAL {P}_jacobian *sums, uint nb, uint per, uint segs,
                          uint total, GLOBAL {P}_jacobian *out) {
  const uint t = GET_GLOBAL_ID();
  if (t >= total) return;
  GLOBAL {P}_jacobian *win = sums + (t / segs) * nb;
  const uint lo = (t % segs) * per;
  const uint hi = min(lo + per, nb);
  {P}_jacobian acc = {P}_ZERO;
  {P}_jacobian res = {P}_ZERO;
  for (uint j = hi; j > lo; j--) {
    acc = {P}_add(acc, win[j - 1]);
    res = {P}_add(res, acc);
  }
  // res = sum (j - lo + 1) sums[j]; the weights are j + 1: add lo * acc.
  {P}_jacobian m = {P}_ZERO;
  for (uint k = lo; k != 0; k >>= 1) {
    if (k & 1) m = {P}_add(m, acc);
    acc = {P}_double(acc);
  }
  out[t] = {P}_add(res, m);
}

// out[t] = in[t g] + ... + in[t g + g - 1] (those below n) for t < total.
KERNEL void {BOUNDS} {P}_pl_sum(GLOBAL {P}_jacobian *in, uint n, uint g, uint total,
                       GLOBAL {P}_jacobian *out) {
  const uint t = GET_GLOBAL_ID();
  if (t >= total) return;
  const ulong lo = (ulong)t * g;
  const ulong hi = min(lo + g, (ulong)n);
  {P}_jacobian acc = {P}_ZERO;
  for (ulong i = lo; i < hi; i++) acc = {P}_add(acc, in[i]);
  out[t] = acc;
}
