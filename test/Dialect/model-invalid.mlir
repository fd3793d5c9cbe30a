// RUN: gtc-opt %s -split-input-file -verify-diagnostics

// A model takes no arguments.
// expected-error @+1 {{a model takes no arguments; its leaves are gt.input, gt.label and gt.param}}
func.func @args(%x: tensor<f32>) -> tensor<f32> attributes {gt.model} {
  return %x : tensor<f32>
}

// -----

// A model returns one f32 scalar.
// expected-error @+1 {{a model returns exactly one value, the loss, of type 'tensor<f32>'}}
func.func @result() -> tensor<2xf32> attributes {gt.model} {
  %0 = gt.input "x" : tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

// gt.model is a unit attribute.
// expected-error @+1 {{'gt.model' must be a unit attribute}}
func.func @unit() -> tensor<f32> attributes {gt.model = 1 : i64} {
  %0 = gt.constant dense<1.0> : tensor<f32>
  return %0 : tensor<f32>
}

// -----

// Unknown gt attributes are rejected.
// expected-error @+1 {{unknown gt dialect attribute 'gt.foo'}}
func.func @unknown() attributes {gt.foo} {
  return
}

// -----

// gt.train names a model.
func.func @not_a_model() {
  return
}
// expected-error @+1 {{'gt.train' op names 'not_a_model', which is not a func.func with the 'gt.model' attribute}}
gt.train @not_a_model {batch = 1 : i64}

// -----

func.func @m() -> tensor<f32> attributes {gt.model} {
  %0 = gt.constant dense<1.0> : tensor<f32>
  return %0 : tensor<f32>
}
// expected-error @+1 {{gt.train has unknown setting 'bacth'}}
gt.train @m {bacth = 1 : i64}

// -----

func.func @m() -> tensor<f32> attributes {gt.model} {
  %0 = gt.constant dense<1.0> : tensor<f32>
  return %0 : tensor<f32>
}
// expected-error @+1 {{setting 'optimizer.name' must be one of "sgd", "adam", "adamw"}}
gt.train @m {optimizer = {name = "lion"}}

// -----

func.func @m() -> tensor<f32> attributes {gt.model} {
  %0 = gt.constant dense<1.0> : tensor<f32>
  return %0 : tensor<f32>
}
// expected-error @+1 {{setting 'data' has unknown field 'shuffle'}}
gt.train @m {data = {kind = "idx", shuffle = true}}

// -----

func.func @m() -> tensor<f32> attributes {gt.model} {
  %0 = gt.constant dense<1.0> : tensor<f32>
  return %0 : tensor<f32>
}
// expected-error @+1 {{'gt.train' op set either 'epochs' or 'steps', not both}}
gt.train @m {epochs = 1 : i64, steps = 10 : i64}

// -----

func.func @m() -> tensor<f32> attributes {gt.model} {
  %0 = gt.constant dense<1.0> : tensor<f32>
  return %0 : tensor<f32>
}
// expected-error @+1 {{setting 'devices' must be an integer from 1 to 65536, all or cpu}}
gt.train @m {devices = "gpu"}

// -----

func.func @m() -> tensor<f32> attributes {gt.model} {
  %0 = gt.constant dense<1.0> : tensor<f32>
  return %0 : tensor<f32>
}
// expected-error @+1 {{setting 'devices' must be an integer from 1 to 65536, all or cpu}}
gt.train @m {devices = 3000000000 : i64}

// -----

func.func @m() -> tensor<f32> attributes {gt.model} {
  %0 = gt.constant dense<1.0> : tensor<f32>
  return %0 : tensor<f32>
}
// expected-error @+1 {{setting 'shard' must be one of "none", "optimizer"}}
gt.train @m {shard = "params"}

// -----

func.func @m() -> tensor<f32> attributes {gt.model} {
  %0 = gt.constant dense<1.0> : tensor<f32>
  return %0 : tensor<f32>
}
// expected-error @+1 {{setting 'grad_clip' must be a number > 0}}
gt.train @m {grad_clip = -1.0 : f64}

// -----

func.func @m() -> tensor<f32> attributes {gt.model} {
  %0 = gt.constant dense<1.0> : tensor<f32>
  return %0 : tensor<f32>
}
// expected-error @+1 {{setting 'shuffle' must be true or false}}
gt.train @m {shuffle = 1 : i64}

// -----

// gt.loss_grad marks the f32 scalar constant that seeds the backward pass.
func.func @seed_type() -> tensor<f32> attributes {gt.model} {
  // expected-error @+1 {{'gt.loss_grad' only applies to a gt.constant of type 'tensor<f32>'}}
  %0 = gt.constant dense<1.0> : tensor<2xf32> {gt.loss_grad}
  %1 = gt.constant dense<1.0> : tensor<f32>
  return %1 : tensor<f32>
}

// -----

func.func @seed_op() -> tensor<f32> attributes {gt.model} {
  %0 = gt.constant dense<1.0> : tensor<f32>
  // expected-error @+1 {{'gt.loss_grad' only applies to a gt.constant}}
  %1 = gt.neg %0 {gt.loss_grad} : tensor<f32>
  return %1 : tensor<f32>
}

// -----

// micro_batch: an integer >= 1 or "auto", dividing the batch.
func.func @m() -> tensor<f32> attributes {gt.model} {
  %0 = gt.constant dense<1.0> : tensor<f32>
  return %0 : tensor<f32>
}
// expected-error @+1 {{setting 'micro_batch' must be an integer >= 1 or auto}}
gt.train @m {micro_batch = "half"}

// -----

func.func @m() -> tensor<f32> attributes {gt.model} {
  %0 = gt.constant dense<1.0> : tensor<f32>
  return %0 : tensor<f32>
}
// expected-error @+1 {{setting 'micro_batch' must be an integer >= 1}}
gt.train @m {micro_batch = 0 : i64}

// -----

func.func @m() -> tensor<f32> attributes {gt.model} {
  %0 = gt.constant dense<1.0> : tensor<f32>
  return %0 : tensor<f32>
}
// expected-error @+1 {{'gt.train' op micro_batch = 24 does not divide batch = 64; give a divisor of it (or auto)}}
gt.train @m {batch = 64 : i64, micro_batch = 24 : i64}

// -----

// checkpoint: a budget in bytes > 0, every >= 1, a known mode.
func.func @m() -> tensor<f32> attributes {gt.model} {
  %0 = gt.constant dense<1.0> : tensor<f32>
  return %0 : tensor<f32>
}
// expected-error @+1 {{setting 'checkpoint.budget' must be a number > 0}}
gt.train @m {checkpoint = {mode = "auto", budget = 0 : i64}}

// -----

func.func @m() -> tensor<f32> attributes {gt.model} {
  %0 = gt.constant dense<1.0> : tensor<f32>
  return %0 : tensor<f32>
}
// expected-error @+1 {{setting 'checkpoint.every' must be a number >= 1}}
gt.train @m {checkpoint = {mode = "every", every = 0 : i64}}

// -----

func.func @m() -> tensor<f32> attributes {gt.model} {
  %0 = gt.constant dense<1.0> : tensor<f32>
  return %0 : tensor<f32>
}
// expected-error @+1 {{setting 'checkpoint.mode' must be one of "none", "auto", "every"}}
gt.train @m {checkpoint = {mode = "sometimes"}}

// -----

// A setting that would do nothing: eval_every without data to evaluate.
func.func @m() -> tensor<f32> attributes {gt.model} {
  %0 = gt.constant dense<1.0> : tensor<f32>
  return %0 : tensor<f32>
}
// expected-error @+1 {{'gt.train' op eval_every has no effect: this train block names no data to evaluate on; add eval = ... or drop eval_every}}
gt.train @m {eval_every = 10 : i64}
