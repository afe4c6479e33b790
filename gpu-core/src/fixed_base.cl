// Fixed-base products of curve `{P}` (parameter generation): out[i] = e_i B for the canonical
// exponents e_i and one base B, through a table of B's multiples: table[w per_window + d - 1] =
// d 2^(w c) B in affine form for window w and digit d in 1..=per_window = 2^(c-1). Each
// exponent's signed (Booth) digits pick one table point per window, so a product is at most
// `windows` mixed additions (in XYZZ coordinates) and no doubling. Uses pippenger.cl's digits
// and XYZZ arithmetic.
KERNEL void {P}_fixed_base(GLOBAL {P}_affine *table, uint c, uint windows, GLOBAL {FR} *exps,
                           uint n, GLOBAL {P}_jacobian *out) {
  const uint i = GET_GLOBAL_ID();
  if (i >= n) return;
  GLOBAL uint *e = (GLOBAL uint *)(exps + i);
  const uint per_window = 1u << (c - 1);
  const {F} fzero = {F}_ZERO;
  {P}_xyzz acc;
  acc.x = fzero;
  acc.y = fzero;
  acc.zz = fzero;
  acc.zzz = fzero;
  for (uint w = 0; w < windows; w++) {
    const int d = pl_digit(e, w, c);
    if (d != 0) {
      {P}_affine p = table[w * per_window + (uint)(d < 0 ? -d : d) - 1];
      if (d < 0) p.y = {F}_sub(fzero, p.y);
      acc = {P}_xyzz_add_affine(acc, p);
    }
  }
  out[i] = {P}_xyzz_to_jacobian(acc);
}
