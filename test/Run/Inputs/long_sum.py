import sys
n, data = int(sys.argv[1]), sys.argv[2]
terms = " + ".join(["x"] * n)
print(f"""# A sum of {n} terms: a chain of one operator, parsed and lowered in a loop.
model longsum {{
  let V = 256, T = 8, D = 8
  input  tokens: i32[B, T]
  label  targets: i32[B, T]
  x = embedding(tokens, V, dim: D, std: 0.1)
  h = {terms}
  loss = cross_entropy(linear(h / {n}, V), targets)
}}
train {{
  data  = text("{data}", seq: T)
  batch = 4
  steps = 3
  optimizer = adamw(lr: 1e-3)
}}""")
