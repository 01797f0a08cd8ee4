// RUN: %ansor-opt %s -split-input-file -ansor-gpu-swizzle-blocks=group=4 | FileCheck %s
// RUN: %ansor-opt %s -split-input-file -ansor-gpu-swizzle-blocks | FileCheck %s --check-prefix=OFF

// A 3 x 8 grid in groups of 4 block rows: l = y * 3 + x, y' = (l / 12) * 4 + (l % 12) % 4,
// x' = (l % 12) / 4.
// CHECK-LABEL: func.func @swizzle
// CHECK-SAME: (%[[OUT:.*]]: memref<8x3xf32>
// CHECK: gpu.launch
// CHECK-NEXT: %[[BX:.*]] = gpu.block_id x
// CHECK-NEXT: %[[BY:.*]] = gpu.block_id y
// CHECK-NEXT: %[[GX:.*]] = arith.constant 3 : index
// CHECK-NEXT: %[[T:.*]] = arith.muli %[[BY]], %[[GX]]
// CHECK-NEXT: %[[LIN:.*]] = arith.addi %[[T]], %[[BX]]
// CHECK-NEXT: %[[PER:.*]] = arith.constant 12 : index
// CHECK-NEXT: %[[GRP:.*]] = arith.divui %[[LIN]], %[[PER]]
// CHECK-NEXT: %[[PER2:.*]] = arith.constant 12 : index
// CHECK-NEXT: %[[REM:.*]] = arith.remui %[[LIN]], %[[PER2]]
// CHECK-NEXT: %[[G:.*]] = arith.constant 4 : index
// CHECK-NEXT: %[[Y0:.*]] = arith.muli %[[GRP]], %[[G]]
// CHECK-NEXT: %[[G2:.*]] = arith.constant 4 : index
// CHECK-NEXT: %[[Y1:.*]] = arith.remui %[[REM]], %[[G2]]
// CHECK-NEXT: %[[Y:.*]] = arith.addi %[[Y0]], %[[Y1]]
// CHECK-NEXT: %[[G3:.*]] = arith.constant 4 : index
// CHECK-NEXT: %[[X:.*]] = arith.divui %[[REM]], %[[G3]]
// CHECK-NOT: gpu.block_id
// CHECK: memref.store %{{.*}}, %[[OUT]][%[[Y]], %[[X]]]
// OFF-LABEL: func.func @swizzle
// OFF-NOT: arith.divui
func.func @swizzle(%out: memref<8x3xf32>, %v: f32) {
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %c8 = arith.constant 8 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c3, %gy = %c8, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    %x = gpu.block_id x
    %y = gpu.block_id y
    memref.store %v, %out[%y, %x] : memref<8x3xf32>
    gpu.terminator
  }
  return
}

// -----

// Negative: a grid height the group does not divide, and a 1-D grid.
// CHECK-LABEL: func.func @no_swizzle
// CHECK-NOT: arith.divui
// CHECK: gpu.block_id y
// CHECK-NOT: arith.divui
// CHECK: gpu.block_id x
// CHECK-NOT: arith.divui
func.func @no_swizzle(%out: memref<6x3xf32>, %v: f32) {
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %c6 = arith.constant 6 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c3, %gy = %c6, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    %y = gpu.block_id y
    memref.store %v, %out[%y, %c1] : memref<6x3xf32>
    gpu.terminator
  }
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c3, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    %x = gpu.block_id x
    memref.store %v, %out[%c1, %x] : memref<6x3xf32>
    gpu.terminator
  }
  return
}
