// Inverses in the base fields, shared by the kernels that make points affine (`fixed_base.cl`'s
// products, `synthetic.cl`'s bases): each thread shares one inversion between many points
// (Montgomery's trick), so a plain Fermat exponentiation is cheap enough.

// a^-1 = a^(p - 2) in Fp (a != 0).
DEVICE {FP} {FP}_pl_inverse({FP} a) {
  {FP} e = {FP}_P;
  e.val[0] -= 2; // p is odd and its low limb is above 2: no borrow
  {FP} r = {FP}_ONE;
  for (int i = {FP}_LIMBS - 1; i >= 0; i--) {
    for (int b = {FP}_LIMB_BITS - 1; b >= 0; b--) {
      r = {FP}_sqr(r);
      if ((e.val[i] >> b) & 1) r = {FP}_mul(r, a);
    }
  }
  return r;
}

// (c0 + c1 u)^-1 = (c0 - c1 u) / (c0^2 + c1^2), as u^2 = -1.
DEVICE {FP2} {FP2}_pl_inverse({FP2} a) {
  const {FP} n = {FP}_pl_inverse({FP}_add({FP}_sqr(a.c0), {FP}_sqr(a.c1)));
  {FP2} r;
  r.c0 = {FP}_mul(a.c0, n);
  r.c1 = {FP}_sub({FP}_ZERO, {FP}_mul(a.c1, n));
  return r;
}
