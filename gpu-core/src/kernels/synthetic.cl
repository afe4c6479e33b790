// Synthetic bases for timing workloads (a partition shaped like a 32 GiB PoRep's, whose proving
// key cannot be generated here): base i = T[u_i] + T[v_i], the affine sum of two points of a
// table T of 2^k random points with pairwise distinct x coordinates, u_i != v_i picked by a hash
// of (seed, i), so the bases are distinct in practice and nobody knows their logarithms. Thread
// t of `threads` makes the bases t, t + threads, ... (stores by adjacent threads are adjacent);
// its divisions share one inversion (Montgomery's trick, `inverse.cl`), the running products
// kept in the output's x coordinates until the backward pass overwrites them.

// A 32-bit integer hash (the "lowbias32" finalizer).
DEVICE uint syn_mix(uint x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}

// The first table index of base i.
DEVICE uint syn_first(uint seed, uint i, uint mask) {
  return syn_mix(seed ^ syn_mix(i)) & mask;
}

// The second: u + 1 + (a hash mod mask), wrapped, so it is never u.
DEVICE uint syn_second(uint seed, uint i, uint mask, uint u) {
  const uint h = syn_mix((seed + 0x9e3779b9u) ^ syn_mix(i ^ 0x85ebca6bu));
  return (u + 1u + h % mask) & mask;
}

// ---- per curve ----

// Bases of curve {P}: out[i] = table[u_i] + table[v_i] for i < n (2^log_table >= 2 points).
KERNEL void {P}_synthetic(GLOBAL {P}_affine *table, uint log_table, uint seed, uint n,
                          uint threads, GLOBAL {P}_affine *out) {
  const uint t = GET_GLOBAL_ID();
  if (t >= threads || t >= n) return;
  const uint mask = (1u << log_table) - 1;
  {F} acc = {F}_ONE;
  uint last = t;
  for (uint i = t; i < n; i += threads) {
    const uint u = syn_first(seed, i, mask);
    const uint v = syn_second(seed, i, mask, u);
    acc = {F}_mul(acc, {F}_sub(table[v].x, table[u].x));
    out[i].x = acc;
    last = i;
  }
  {F} inv = {F}_pl_inverse(acc);
  for (uint i = last;; i -= threads) {
    const uint u = syn_first(seed, i, mask);
    const uint v = syn_second(seed, i, mask, u);
    const {P}_affine a = table[u];
    const {P}_affine b = table[v];
    // 1 / (b.x - a.x): the inverse of the product so far times the product before this one.
    const {F} inv_i = i >= t + threads ? {F}_mul(inv, out[i - threads].x) : inv;
    inv = {F}_mul(inv, {F}_sub(b.x, a.x));
    const {F} lambda = {F}_mul({F}_sub(b.y, a.y), inv_i);
    const {F} x3 = {F}_sub({F}_sub({F}_sqr(lambda), a.x), b.x);
    out[i].x = x3;
    out[i].y = {F}_sub({F}_mul(lambda, {F}_sub(a.x, x3)), a.y);
    if (i < t + threads) break;
  }
}
