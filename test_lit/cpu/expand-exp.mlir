// RUN: %ansor-opt %s -ansor-expand-exp | FileCheck %s

// A vector f32 exp becomes the Cephes arithmetic (no math.exp left), contracting mulf/addf, n
// rounded by the 1.5 * 2^23 magic number (no floor, no fptosi), the exponent built by an integer
// shift of the rounded sum's bits, and one select (+inf above the range; below it the zero
// exponent field gives 0); an f64 exp is left alone.
// CHECK-LABEL: func.func @vec
// CHECK-NOT: math.exp
// CHECK: arith.maximumf
// CHECK: arith.minimumf
// CHECK-NOT: math.floor
// CHECK: arith.mulf {{.*}} fastmath<contract> : vector<8xf32>
// CHECK: arith.constant dense<0x4B400000> : vector<8xf32>
// CHECK: %[[T:.*]] = arith.minimumf
// CHECK-NOT: arith.fptosi
// CHECK: arith.bitcast %[[T]] : vector<8xf32> to vector<8xi32>
// CHECK: arith.shli
// CHECK: arith.bitcast {{.*}} : vector<8xi32> to vector<8xf32>
// CHECK-NOT: arith.cmpf olt
// CHECK: arith.cmpf ogt
// CHECK: %[[R:.*]] = arith.select
// CHECK-NOT: arith.select
// CHECK-NOT: math.exp
// CHECK: return %[[R]]
func.func @vec(%x: vector<8xf32>) -> vector<8xf32> {
  %y = math.exp %x : vector<8xf32>
  return %y : vector<8xf32>
}

// CHECK-LABEL: func.func @scalar
// CHECK-NOT: math.exp
// CHECK: arith.bitcast {{.*}} : i32 to f32
// CHECK: return
func.func @scalar(%x: f32) -> f32 {
  %y = math.exp %x : f32
  return %y : f32
}

// CHECK-LABEL: func.func @f64
// CHECK: math.exp %{{.*}} : f64
func.func @f64(%x: f64) -> f64 {
  %y = math.exp %x : f64
  return %y : f64
}
