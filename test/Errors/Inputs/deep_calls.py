"""A model of N chained functions, each nesting its call to the one before
in R repeat loops under a chain of unary minuses: deep, and legal."""
import sys

calls, loops = int(sys.argv[1]), int(sys.argv[2])
out = ["model m {", "  input x: f32[B, 4]", "  label y: i32[B]",
       "  def f0(a) { return " + "-" * 150 + "a }"]
for i in range(1, calls):
    out.append("  def f%d(a) {" % i)
    out.append("    h = a")
    out += ["    repeat 1 {"] * loops
    out.append("    h = " + "-" * 100 + "f%d(h)" % (i - 1))
    out += ["    }"] * loops
    out.append("    return h")
    out.append("  }")
out += ["  h = f%d(x)" % (calls - 1), "  loss = cross_entropy(linear(h, 3), y)",
        "}"]
print("\n".join(out))
