// RUN: not ansor-opt %s --split-input-file --ansor-gpu-guard-padded-reads 2>/dev/null | FileCheck %s
// RUN: not ansor-opt %s --split-input-file --ansor-gpu-guard-padded-reads 2>&1 | FileCheck %s --check-prefix=ERR

// The result side of ansor-gpu-guard-padded-reads (ragged GPU tiles): a padded result buffer's
// accesses become masked 1-D transfers along rows of the destination; no branch.

// A result padded from 5x6 to 8x8: a 2x4 register tile written and read through subviews, a
// scalar store, then the interior copied out. Every access moves to a row of %out.
func.func @result(%out: memref<5x6xf32>, %i: index, %j: index, %v: vector<2x4xf32>, %s: f32) -> vector<2x4xf32> {
  %c0 = arith.constant 0 : index
  %z = arith.constant 0.0 : f32
  %buf = memref.alloc() : memref<8x8xf32>
  %tile = memref.subview %buf[%i, %j] [2, 4] [1, 1] : memref<8x8xf32> to memref<2x4xf32, strided<[8, 1], offset: ?>>
  %r = vector.transfer_read %tile[%c0, %c0], %z {in_bounds = [true, true]} : memref<2x4xf32, strided<[8, 1], offset: ?>>, vector<2x4xf32>
  vector.transfer_write %v, %tile[%c0, %c0] {in_bounds = [true, true]} : vector<2x4xf32>, memref<2x4xf32, strided<[8, 1], offset: ?>>
  memref.store %s, %buf[%i, %c0] : memref<8x8xf32>
  %in = memref.subview %buf[0, 0] [5, 6] [1, 1] : memref<8x8xf32> to memref<5x6xf32, strided<[8, 1]>>
  memref.copy %in, %out : memref<5x6xf32, strided<[8, 1]>> to memref<5x6xf32>
  memref.dealloc %buf : memref<8x8xf32>
  return %r : vector<2x4xf32>
}

// CHECK-LABEL: func.func @result(
// CHECK-SAME: %[[OUT:[a-z0-9]+]]: memref<5x6xf32>, %[[I:[a-z0-9]+]]: index, %[[J:[a-z0-9]+]]: index, %[[V:[a-z0-9]+]]: vector<2x4xf32>, %[[S:[a-z0-9]+]]: f32
// CHECK-NOT: memref.alloc
// CHECK-NOT: scf.if
// the 2x4 read: row 0 (in bounds when the row is < 5; clamped for the view; else column 6:
// every lane masked), not in bounds along the row (the default, not printed)
// CHECK: %[[R0:.*]] = arith.addi %[[I]], %{{.*}} : index
// CHECK: %[[C0:.*]] = arith.addi %[[J]], %{{.*}} : index
// CHECK: %[[C5:.*]] = arith.constant 5 : index
// CHECK: %[[OK:.*]] = arith.cmpi ult, %[[R0]], %[[C5]] : index
// CHECK: %[[C4:.*]] = arith.constant 4 : index
// CHECK: %[[ROW:.*]] = arith.minui %[[R0]], %[[C4]] : index
// CHECK: %[[C6:.*]] = arith.constant 6 : index
// CHECK: %[[COL:.*]] = arith.select %[[OK]], %[[C0]], %[[C6]] : index
// CHECK: %[[VIEW:.*]] = memref.subview %[[OUT]][%[[ROW]], 0] [1, 6] [1, 1] : memref<5x6xf32> to memref<6xf32, strided<[1], offset: ?>>
// CHECK: %[[P0:.*]] = vector.transfer_read %[[VIEW]][%[[COL]]], %{{.*}} : memref<6xf32, strided<[1], offset: ?>>, vector<4xf32>
// CHECK: %[[A0:.*]] = vector.insert %[[P0]], %{{.*}} [0] : vector<4xf32> into vector<2x4xf32>
// CHECK: vector.transfer_read %{{.*}} : memref<6xf32, strided<[1], offset: ?>>, vector<4xf32>
// CHECK: %[[A1:.*]] = vector.insert %{{.*}}, %[[A0]] [1] : vector<4xf32> into vector<2x4xf32>
// the write: one row at a time
// CHECK: %[[W0:.*]] = vector.extract %[[V]][0] : vector<4xf32> from vector<2x4xf32>
// CHECK: vector.transfer_write %[[W0]], %{{.*}}[%{{.*}}] : vector<4xf32>, memref<6xf32, strided<[1], offset: ?>>
// CHECK: %[[W1:.*]] = vector.extract %[[V]][1] : vector<4xf32> from vector<2x4xf32>
// CHECK: vector.transfer_write %[[W1]], %{{.*}}[%{{.*}}] : vector<4xf32>, memref<6xf32, strided<[1], offset: ?>>
// the scalar store: a one-lane transfer
// CHECK: %[[B:.*]] = vector.broadcast %[[S]] : f32 to vector<1xf32>
// CHECK: vector.transfer_write %[[B]], %{{.*}}[%{{.*}}] : vector<1xf32>, memref<6xf32, strided<[1], offset: ?>>
// CHECK-NOT: memref.copy
// CHECK-NOT: memref.dealloc
// CHECK: return %[[A1]]

// -----

// A padded tensor.empty result: the garbage copied in and the fill outside the kernel go too,
// since nothing reads the buffer.
func.func @empty_result(%out: memref<5x6xf32>, %i: index, %v: vector<4xf32>) {
  %c0 = arith.constant 0 : index
  %z = arith.constant 0.0 : f32
  %garbage = memref.alloc() : memref<5x6xf32>
  %buf = memref.alloc() : memref<8x8xf32>
  linalg.fill ins(%z : f32) outs(%buf : memref<8x8xf32>)
  %in = memref.subview %buf[0, 0] [5, 6] [1, 1] : memref<8x8xf32> to memref<5x6xf32, strided<[8, 1]>>
  memref.copy %garbage, %in : memref<5x6xf32> to memref<5x6xf32, strided<[8, 1]>>
  vector.transfer_write %v, %buf[%i, %c0] {in_bounds = [true]} : vector<4xf32>, memref<8x8xf32>
  memref.copy %in, %out : memref<5x6xf32, strided<[8, 1]>> to memref<5x6xf32>
  return
}

// CHECK-LABEL: func.func @empty_result(
// CHECK-NOT: memref.alloc
// CHECK-NOT: linalg.fill
// CHECK-NOT: memref.copy
// CHECK: vector.transfer_write %{{.*}} : vector<4xf32>, memref<6xf32, strided<[1], offset: ?>>
// CHECK-NEXT: return

// -----

// Not a padded result: the copy out takes the whole buffer.
func.func @not_padded(%out: memref<8x8xf32>, %v: vector<4xf32>) {
  %c0 = arith.constant 0 : index
  %buf = memref.alloc() : memref<8x8xf32>
  vector.transfer_write %v, %buf[%c0, %c0] {in_bounds = [true]} : vector<4xf32>, memref<8x8xf32>
  %in = memref.subview %buf[0, 0] [8, 8] [1, 1] : memref<8x8xf32> to memref<8x8xf32, strided<[8, 1]>>
  memref.copy %in, %out : memref<8x8xf32, strided<[8, 1]>> to memref<8x8xf32>
  return
}

// CHECK-LABEL: func.func @not_padded(
// CHECK: memref.alloc() : memref<8x8xf32>
// CHECK: memref.copy

// -----

// A fill outside the kernel that another access reads: its values would be lost.
func.func @filled_and_read(%out: memref<5x6xf32>, %i: index) -> vector<4xf32> {
  %c0 = arith.constant 0 : index
  %z = arith.constant 0.0 : f32
  %buf = memref.alloc() : memref<8x8xf32>
  linalg.fill ins(%z : f32) outs(%buf : memref<8x8xf32>)
  %r = vector.transfer_read %buf[%i, %c0], %z {in_bounds = [true]} : memref<8x8xf32>, vector<4xf32>
  %in = memref.subview %buf[0, 0] [5, 6] [1, 1] : memref<8x8xf32> to memref<5x6xf32, strided<[8, 1]>>
  memref.copy %in, %out : memref<5x6xf32, strided<[8, 1]>> to memref<5x6xf32>
  return %r : vector<4xf32>
}

// ERR: error: padded result buffer filled outside the kernel that reads it

// -----

// A one-element tile left as `linalg.copy` (a ragged transpose's 1x1 register tile) copying a
// padded input into a padded result inside the kernel. The input side lowers the copy to loops,
// whose load of the result (the copy's unused out value) is not a read: the result's fill
// outside the kernel goes, and the store becomes a masked one-lane transfer into %out.
func.func @copy_tile(%x: memref<3x5xf32>, %out: memref<5x3xf32>, %i: index, %j: index) {
  %c1 = arith.constant 1 : index
  %z = arith.constant 0.0 : f32
  %garbage = memref.alloc() : memref<5x3xf32>
  %pin = memref.alloc() : memref<3x8xf32>
  linalg.fill ins(%z : f32) outs(%pin : memref<3x8xf32>)
  %pin_in = memref.subview %pin[0, 0] [3, 5] [1, 1] : memref<3x8xf32> to memref<3x5xf32, strided<[8, 1]>>
  memref.copy %x, %pin_in : memref<3x5xf32> to memref<3x5xf32, strided<[8, 1]>>
  %buf = memref.alloc() : memref<8x3xf32>
  linalg.fill ins(%z : f32) outs(%buf : memref<8x3xf32>)
  %in = memref.subview %buf[0, 0] [5, 3] [1, 1] : memref<8x3xf32> to memref<5x3xf32, strided<[3, 1]>>
  memref.copy %garbage, %in : memref<5x3xf32> to memref<5x3xf32, strided<[3, 1]>>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    %s = memref.subview %pin[%i, %j] [1, 1] [1, 1] : memref<3x8xf32> to memref<1x1xf32, strided<[8, 1], offset: ?>>
    %d = memref.subview %buf[%j, %i] [1, 1] [1, 1] : memref<8x3xf32> to memref<1x1xf32, strided<[3, 1], offset: ?>>
    linalg.copy ins(%s : memref<1x1xf32, strided<[8, 1], offset: ?>>) outs(%d : memref<1x1xf32, strided<[3, 1], offset: ?>>)
    gpu.terminator
  }
  memref.copy %in, %out : memref<5x3xf32, strided<[3, 1]>> to memref<5x3xf32>
  return
}

// CHECK-LABEL: func.func @copy_tile(
// CHECK-SAME: %[[X:[a-z0-9]+]]: memref<3x5xf32>, %[[OUT:[a-z0-9]+]]: memref<5x3xf32>
// CHECK-NOT: memref.alloc
// CHECK-NOT: linalg.fill
// CHECK-NOT: memref.copy
// CHECK: gpu.launch
// CHECK-NOT: linalg.copy
// CHECK: memref.load %[[X]]
// CHECK: arith.select
// CHECK: memref.subview %[[OUT]]
// CHECK: vector.transfer_write %{{.*}} : vector<1xf32>, memref<3xf32, strided<[1], offset: ?>>
// CHECK-NOT: memref.load
// CHECK: gpu.terminator
// CHECK-NOT: memref.copy

// -----

// The same copy with only the result padded: the kernel's linalg.copy is lowered to loops by
// the result side too.
func.func @copy_tile_result_only(%x: memref<5x3xf32>, %out: memref<5x3xf32>, %i: index, %j: index) {
  %c1 = arith.constant 1 : index
  %z = arith.constant 0.0 : f32
  %buf = memref.alloc() : memref<8x3xf32>
  linalg.fill ins(%z : f32) outs(%buf : memref<8x3xf32>)
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    %s = memref.subview %x[%i, %j] [1, 1] [1, 1] : memref<5x3xf32> to memref<1x1xf32, strided<[3, 1], offset: ?>>
    %d = memref.subview %buf[%i, %j] [1, 1] [1, 1] : memref<8x3xf32> to memref<1x1xf32, strided<[3, 1], offset: ?>>
    linalg.copy ins(%s : memref<1x1xf32, strided<[3, 1], offset: ?>>) outs(%d : memref<1x1xf32, strided<[3, 1], offset: ?>>)
    gpu.terminator
  }
  %in = memref.subview %buf[0, 0] [5, 3] [1, 1] : memref<8x3xf32> to memref<5x3xf32, strided<[3, 1]>>
  memref.copy %in, %out : memref<5x3xf32, strided<[3, 1]>> to memref<5x3xf32>
  return
}

// CHECK-LABEL: func.func @copy_tile_result_only(
// CHECK-SAME: %[[X:[a-z0-9]+]]: memref<5x3xf32>, %[[OUT:[a-z0-9]+]]: memref<5x3xf32>
// CHECK-NOT: memref.alloc
// CHECK-NOT: linalg.fill
// CHECK: gpu.launch
// CHECK-NOT: linalg.copy
// CHECK: memref.load
// CHECK: vector.transfer_write %{{.*}} : vector<1xf32>, memref<3xf32, strided<[1], offset: ?>>
// CHECK: gpu.terminator
// CHECK-NOT: memref.copy
