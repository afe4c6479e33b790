// The 0/1 split on the device: a query term's scalars (canonical little-endian 256-bit numbers,
// 8 words each) classified as zero, one or other, among the variables its density marks used
// (bit j of the density words for scalar j; every scalar without a density). Blocks of 32
// scalars, one thread each, in two passes:
//   1. cls_count: per block, the used variables, the ones and the others;
//   2. (the three counts scanned, exclusively, by pl_scan_*)
//   3. cls_write: per block, the base index of each one (into ones[]) and of each other (into
//      idx[], its exponent into exps[]), in ascending order: the lists the host scan makes.
// A used variable's base index is `base_start` plus the used variables before it.

// The used variables of block b as a mask (bit j: scalar 32 b + j is used).
DEVICE uint cls_used(GLOBAL uint *density, uint has_density, uint b, uint n) {
  uint m = has_density ? density[b] : 0xffffffffu;
  const uint left = n - 32 * b;
  if (left < 32) m &= (1u << left) - 1;
  return m;
}

// 0 for zero, 1 for one, 2 for any other scalar.
DEVICE uint cls_kind(GLOBAL uint *s) {
  const uint high = s[1] | s[2] | s[3] | s[4] | s[5] | s[6] | s[7];
  if (high == 0 && s[0] <= 1) return s[0];
  return 2;
}

// Block b of `blocks` (= ceil(n / 32)): used[b], ones[b], others[b]; thread `blocks` writes the
// zeros after the last block, so that an exclusive scan of blocks + 1 counts ends in the totals.
KERNEL void cls_count(GLOBAL uint *scalars, GLOBAL uint *density, uint has_density, uint n,
                      uint blocks, GLOBAL uint *used, GLOBAL uint *ones, GLOBAL uint *others) {
  const uint b = GET_GLOBAL_ID();
  if (b > blocks) return;
  uint u = 0, o = 0, d = 0;
  if (b < blocks) {
    const uint m = cls_used(density, has_density, b, n);
    for (uint j = 0; j < 32; j++) {
      if ((m >> j) & 1) {
        const uint k = cls_kind(scalars + 8 * (ulong)(32 * b + j));
        u += 1;
        o += k == 1;
        d += k == 2;
      }
    }
  }
  used[b] = u;
  ones[b] = o;
  others[b] = d;
}

// Block b's lists, at its scanned offsets plus `ones_at` / `others_at` (where this term's lists
// start in the query's).
KERNEL void cls_write(GLOBAL uint *scalars, GLOBAL uint *density, uint has_density, uint n,
                      uint blocks, GLOBAL uint *used, GLOBAL uint *ones, GLOBAL uint *others,
                      uint base_start, uint ones_at, uint others_at, GLOBAL uint *ones_out,
                      GLOBAL uint *idx_out, GLOBAL uint *exps_out) {
  const uint b = GET_GLOBAL_ID();
  if (b >= blocks) return;
  const uint m = cls_used(density, has_density, b, n);
  uint k = base_start + used[b];
  uint o = ones_at + ones[b];
  uint d = others_at + others[b];
  for (uint j = 0; j < 32; j++) {
    if ((m >> j) & 1) {
      GLOBAL uint *s = scalars + 8 * (ulong)(32 * b + j);
      const uint kind = cls_kind(s);
      if (kind == 1) {
        ones_out[o++] = k;
      } else if (kind == 2) {
        idx_out[d] = k;
        for (uint w = 0; w < 8; w++) exps_out[8 * (ulong)d + w] = s[w];
        d++;
      }
      k++;
    }
  }
}
