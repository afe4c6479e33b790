// proofline's NTT over Fr: a Stockham transform (natural order in and out, out of place) in
// passes of up to 2^10 points, one kernel per pass. A pass reads a tile of `C` consecutive
// columns of `R = 2^d` rows (coalesced: the columns are adjacent in memory), multiplies each
// element by its twiddle (read from a table of the pass's root's powers where that table is
// small, else made from a two-level table of omega's powers with one multiplication; no `pow`
// per thread), runs the radix-2 rounds of the columns' R-point DFTs G at a time in
// registers (2^G elements a thread), exchanging through group-local memory between them, and
// stores the columns' outputs in runs of adjacent addresses. The local memory keeps one plane
// per limb, padded one word in 32, so that threads touching adjacent or strided elements hit
// distinct banks.
//
// For column j (k = j mod p, p = the product of the earlier passes' radices, t = N / R) the pass
// computes U_f = sum_i x[j + i t] w^(i k) W^(i f) with w = omega^(t / p), W = omega^t, and
// stores it at (j - k) R + k + f p. The rounds are decimation in frequency, so the column ends
// in bit-reversed order; the store reads it back in order.
//
// The last pass of a transform can finish the H pipeline's element-wise steps as it stores
// (`mode`): scale by a table of g^a c (the move to or from the coset), multiply into another
// vector (A B), subtract from it and scale ((A B - C) / Z), and leave canonical exponents.

#ifdef CUDA
#define PL_SHARED
#else
#define PL_SHARED LOCAL
#endif

#define PL_NTT_STORE 0
#define PL_NTT_SCALE 1
#define PL_NTT_MUL_INTO 2
#define PL_NTT_SUB_INTO 3
#define PL_NTT_SCALE_CANONICAL 4

#ifndef PL_NTT_LOG_PER
#define PL_NTT_LOG_PER 1
#endif
#define PL_NTT_PER (1u << PL_NTT_LOG_PER)

// A plane index with one word of padding per 32.
DEVICE uint {FR}_ntt_pad(uint i) {
  return i + (i >> 5);
}

DEVICE {FR} {FR}_ntt_get(PL_SHARED {FR}_limb *sh, uint plane, uint i) {
  {FR} v;
  const uint at = {FR}_ntt_pad(i);
  for (uint l = 0; l < {FR}_LIMBS; l++) v.val[l] = sh[l * plane + at];
  return v;
}

DEVICE void {FR}_ntt_put(PL_SHARED {FR}_limb *sh, uint plane, uint i, {FR} v) {
  const uint at = {FR}_ntt_pad(i);
  for (uint l = 0; l < {FR}_LIMBS; l++) sh[l * plane + at] = v.val[l];
}

#ifdef CUDA
// An element as its two 16-byte halves.
typedef union {
  uint4 q[2];
  {FR} v;
} {FR}_ntt_halves;
#endif

// Element i of a global vector. On CUDA in two 16-byte accesses instead of one per limb (the
// elements are 32 bytes and every buffer starts on a 32-byte boundary: `BUFFER_ALIGN`, which
// the CUDA backend checks at allocation): a quarter of the load instructions with 32-bit limbs.
// On the H200 the NTT takes 15% less time at 2^24 (docs/design-decisions.md#ntt).
DEVICE {FR} {FR}_ntt_read(GLOBAL {FR} *x, uint i) {
#ifdef CUDA
  {FR}_ntt_halves u;
  const uint4 *at = (const uint4 *)(x + i);
  u.q[0] = at[0];
  u.q[1] = at[1];
  return u.v;
#else
  return x[i];
#endif
}

// Writes element i of a global vector (on CUDA in two 16-byte accesses, as above).
DEVICE void {FR}_ntt_write(GLOBAL {FR} *y, uint i, {FR} v) {
#ifdef CUDA
  {FR}_ntt_halves u;
  u.v = v;
  uint4 *at = (uint4 *)(y + i);
  at[0] = u.q[0];
  at[1] = u.q[1];
#else
  y[i] = v;
#endif
}

// r^e from the two-level table lo[i] = r^i (i < 2^s), hi[i] = r^(i 2^s).
DEVICE {FR} {FR}_ntt_power(GLOBAL {FR} *lo, GLOBAL {FR} *hi, uint e, uint s) {
  {FR} w = {FR}_ntt_read(lo, e & ((1u << s) - 1));
  if (e >> s) w = {FR}_mul(w, {FR}_ntt_read(hi, e >> s));
  return w;
}

// A pass's single twiddle table: out[x] = r^(x << shift) for x < n, from the two-level table
// of r's powers split at `s` (one product an entry). Made on the device for every transform
// set: on the host it took one serial product an entry (2^22 of them for a 2^22 domain's last
// pass), per partition.
KERNEL void {FR}_ntt_table(GLOBAL {FR} *out, GLOBAL {FR} *lo, GLOBAL {FR} *hi, uint s,
                           uint shift, uint n) {
  const uint x = GET_GLOBAL_ID();
  if (x < n) {FR}_ntt_write(out, x, {FR}_ntt_power(lo, hi, x << shift, s));
}

// The position, within its column, of slot `m` of a stage's thread: the thread's 2^G slots hold
// 2^G >> g groups of 2^g elements, group `q`'s elements being 2^shift apart.
DEVICE uint {FR}_ntt_slot(uint q, uint m, uint g, uint shift) {
  const uint low = q & ((1u << shift) - 1);
  const uint base = ((q >> shift) << (shift + g)) | low;
  return base + ((m & ((1u << g) - 1)) << shift);
}

// ---- per G ----

// One pass: see above. The kernel is written once per G, the log2 of the elements a thread
// holds in the rounds (fewer elements, fewer registers: more threads fit on a multiprocessor).
// `tw_lo`/`tw_hi`: the pass's twiddles w^(i k) as powers of omega (two-level, split at `tw_s`,
// exponent (i k) << log_step), or a single table of w's powers (`tw_s` covering every i k,
// `log_step` 0, `tw_hi` unread); `inner`: the 2^(log_inner - 1)
// first powers of the 2^log_inner-th root omega^(N / 2^log_inner); `sc_lo`/`sc_hi`: the
// store's scale table (split at `s`), `z` the vector the store combines with, `k` its
// constant. Groups of 2^(log_c + d - G) threads (at least 1), N / 2^(log_c + d) groups.
KERNEL void {FR}_ntt_pass_g{G}(GLOBAL {FR} *x, GLOBAL {FR} *y, GLOBAL {FR} *tw_lo,
                          GLOBAL {FR} *tw_hi, GLOBAL {FR} *inner, GLOBAL {FR} *sc_lo,
                          GLOBAL {FR} *sc_hi, GLOBAL {FR} *z, {FR} k,
                          PL_SHARED {FR}_limb *sh_arg, uint log_n, uint lgp, uint d,
                          uint log_c, uint s, uint log_inner, uint mode, uint tw_s,
                          uint log_step) {
#ifdef CUDA
  {FR}_limb *sh = ({FR}_limb *)cuda_shared;
#else
  LOCAL {FR}_limb *sh = sh_arg;
#endif
  uint tid;
  tid = GET_LOCAL_ID();
  uint threads;
  threads = GET_LOCAL_SIZE();
  uint group;
  group = GET_GROUP_ID();
  const uint cols = 1u << log_c;
  const uint size = cols << d;
  const uint plane = {FR}_ntt_pad(size);
  const uint t = (1u << log_n) >> d;
  const uint p = 1u << lgp;
  const uint j0 = group << log_c;

  for (uint o = tid; o < size; o += threads) {
    const uint c = o & (cols - 1);
    const uint i = o >> log_c;
    const uint j = j0 + c;
    {FR} v = {FR}_ntt_read(x, j + i * t);
    const uint e = (i * (j & (p - 1))) << log_step;
    if (e != 0) v = {FR}_mul(v, {FR}_ntt_power(tw_lo, tw_hi, e, tw_s));
    {FR}_ntt_put(sh, plane, (c << d) + i, v);
  }
  BARRIER_LOCAL();

  for (uint r0 = 0; r0 < d; r0 += {G}) {
    const uint g = min((uint){G}, d - r0);
    const uint shift = d - r0 - g;
    const uint groups = size >> g;
    const uint per_col = 1u << (d - g);
    {FR} u[(1u << {G})];
#pragma unroll
    for (uint m = 0; m < (1u << {G}); m++) {
      const uint gq = tid * ((1u << {G}) >> g) + (m >> g);
      u[m] = {FR}_ZERO;
      if (gq < groups) {
        const uint c = gq >> (d - g);
        const uint at = {FR}_ntt_slot(gq & (per_col - 1), m, g, shift);
        u[m] = {FR}_ntt_get(sh, plane, (c << d) + at);
      }
    }
#pragma unroll
    for (int hb = {G} - 1; hb >= 0; hb--) {
      if ((uint)hb < g) {
        const uint rnd = r0 + g - 1 - (uint)hb;
        const uint bit = 1u << (shift + (uint)hb);
#pragma unroll
        for (uint m = 0; m < (1u << {G}); m++) {
          if ((m & (1u << hb)) == 0) {
            const uint gq = tid * ((1u << {G}) >> g) + (m >> g);
            const uint i0 = {FR}_ntt_slot(gq & (per_col - 1), m, g, shift);
            const uint di = i0 & (bit - 1);
            const {FR} a = u[m];
            const {FR} b = u[m + (1u << hb)];
            u[m] = {FR}_add(a, b);
            {FR} diff = {FR}_sub(a, b);
            if (di != 0) {
              diff = {FR}_mul(diff, {FR}_ntt_read(inner, (di << rnd) << (log_inner - d)));
            }
            u[m + (1u << hb)] = diff;
          }
        }
      }
    }
    BARRIER_LOCAL();
#pragma unroll
    for (uint m = 0; m < (1u << {G}); m++) {
      const uint gq = tid * ((1u << {G}) >> g) + (m >> g);
      if (gq < groups) {
        const uint c = gq >> (d - g);
        const uint at = {FR}_ntt_slot(gq & (per_col - 1), m, g, shift);
        {FR}_ntt_put(sh, plane, (c << d) + at, u[m]);
      }
    }
    BARRIER_LOCAL();
  }

  for (uint o = tid; o < size; o += threads) {
    uint c, f;
    if (log_c <= lgp) {
      c = o & (cols - 1);
      f = o >> log_c;
    } else {
      c = (o & (p - 1)) | ((o >> (lgp + d)) << lgp);
      f = (o >> lgp) & ((1u << d) - 1);
    }
    const uint j = j0 + c;
    const uint kk = j & (p - 1);
    const uint a = ((j - kk) << d) + kk + (f << lgp);
    {FR} v = {FR}_ntt_get(sh, plane, (c << d) + bitreverse(f, d));
    if (mode == PL_NTT_SCALE || mode == PL_NTT_SCALE_CANONICAL) {
      v = {FR}_mul(v, {FR}_ntt_power(sc_lo, sc_hi, a, s));
      if (mode == PL_NTT_SCALE_CANONICAL) v = {FR}_unmont(v);
    } else if (mode == PL_NTT_MUL_INTO) {
      v = {FR}_mul({FR}_ntt_read(z, a), v);
    } else if (mode == PL_NTT_SUB_INTO) {
      v = {FR}_mul({FR}_sub({FR}_ntt_read(z, a), v), k);
    }
    {FR}_ntt_write(y, a, v);
  }
}
