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
  {P}_xyzz acc = {P}_xyzz_zero();
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

// Affine forms of n jacobian points (x = X / Z^2, y = Y / Z^3; the identity, Z = 0, becomes
// (0, 0) as in blst). Thread t of `threads` makes the points t, t + threads, ... with one shared
// inversion (`inverse.cl`): the running products of the Z's are kept in the output's x
// coordinates until the backward pass overwrites them, as `synthetic.cl` does.
KERNEL void {P}_to_affine(GLOBAL {P}_jacobian *in, uint n, uint threads,
                          GLOBAL {P}_affine *out) {
  const uint t = GET_GLOBAL_ID();
  if (t >= threads || t >= n) return;
  const {F} fzero = {F}_ZERO;
  {F} acc = {F}_ONE;
  uint last = t;
  for (uint i = t; i < n; i += threads) {
    const {F} z = in[i].z;
    if (!{F}_eq(z, fzero)) acc = {F}_mul(acc, z);
    out[i].x = acc;
    last = i;
  }
  {F} inv = {F}_pl_inverse(acc);
  for (uint i = last;; i -= threads) {
    const {P}_jacobian p = in[i];
    if ({F}_eq(p.z, fzero)) {
      out[i].x = fzero;
      out[i].y = fzero;
    } else {
      // 1 / Z_i: the inverse of the product so far times the product before this point.
      const {F} inv_i = i >= t + threads ? {F}_mul(inv, out[i - threads].x) : inv;
      inv = {F}_mul(inv, p.z);
      const {F} zz = {F}_sqr(inv_i);
      out[i].x = {F}_mul(p.x, zz);
      out[i].y = {F}_mul(p.y, {F}_mul(zz, inv_i));
    }
    if (i < t + threads) break;
  }
}
