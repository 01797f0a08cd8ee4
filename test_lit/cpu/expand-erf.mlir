// RUN: %ansor-opt %s -ansor-expand-erf | FileCheck %s
// RUN: %ansor-opt %s -ansor-expand-erf -ansor-expand-exp | FileCheck %s --check-prefix=BOTH

// An f32 erf becomes A&S 7.1.26 with one math.exp, the Maclaurin branch and a select on |x| < 0.5;
// after ansor-expand-exp no transcendental call is left.
// CHECK-LABEL: func.func @vec
// CHECK-NOT: math.erf
// CHECK: math.absf
// CHECK: arith.divf
// CHECK: math.exp
// CHECK: math.copysign
// CHECK: arith.cmpf olt
// CHECK: %[[R:.*]] = arith.select
// CHECK: return %[[R]]
// BOTH-LABEL: func.func @vec
// BOTH-NOT: math.erf
// BOTH-NOT: math.exp
// BOTH: return
func.func @vec(%x: vector<8xf32>) -> vector<8xf32> {
  %y = math.erf %x : vector<8xf32>
  return %y : vector<8xf32>
}

// CHECK-LABEL: func.func @f64
// CHECK: math.erf %{{.*}} : f64
func.func @f64(%x: f64) -> f64 {
  %y = math.erf %x : f64
  return %y : f64
}
