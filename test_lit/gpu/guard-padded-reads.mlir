// RUN: not ansor-opt %s --split-input-file --ansor-gpu-guard-padded-reads 2>/dev/null | FileCheck %s
// RUN: not ansor-opt %s --split-input-file --ansor-gpu-guard-padded-reads 2>&1 | FileCheck %s --check-prefix=ERR

// A padded copy (alloc, fill, copy into the interior): every read becomes a guarded read of
// the source; the buffer, its fill, copy and dealloc go.
// CHECK-LABEL: func.func @pad(
// CHECK-SAME: %[[SRC:[a-z0-9]+]]: memref<4x6xf32>, %[[I:[a-z0-9]+]]: index, %[[J:[a-z0-9]+]]: index
// CHECK-NOT: memref.alloc
// CHECK-NOT: linalg.fill
// CHECK-NOT: memref.copy
// the scalar load: shifted indices, in-bounds test on both padded dims, indices clamped into
// the source (the read is always in bounds) and a select of the padding value: no branch
// CHECK-NOT: scf.if
// CHECK: %[[M1:.*]] = arith.constant -1 : index
// CHECK: %[[P0:.*]] = arith.addi %[[I]], %[[M1]] : index
// CHECK: %[[P1:.*]] = arith.addi %[[J]], %{{.*}} : index
// CHECK: %[[C4:.*]] = arith.constant 4 : index
// CHECK: %[[IN0:.*]] = arith.cmpi ult, %[[P0]], %[[C4]] : index
// CHECK: %[[Z0:.*]] = arith.constant 0 : index
// CHECK: %[[C3:.*]] = arith.constant 3 : index
// CHECK: %[[LO0:.*]] = arith.maxsi %[[P0]], %[[Z0]] : index
// CHECK: %[[Q0:.*]] = arith.minsi %[[LO0]], %[[C3]] : index
// CHECK: %[[C6:.*]] = arith.constant 6 : index
// CHECK: %[[IN1:.*]] = arith.cmpi ult, %[[P1]], %[[C6]] : index
// CHECK: %[[IN:.*]] = arith.andi %[[IN0]], %[[IN1]] : i1
// CHECK: %[[Q1:.*]] = arith.minsi %{{.*}}, %{{.*}} : index
// CHECK: %[[X:.*]] = memref.load %[[SRC]][%[[Q0]], %[[Q1]]] : memref<4x6xf32>
// CHECK: %[[Z:.*]] = arith.constant 0.000000e+00 : f32
// CHECK: %[[L:.*]] = arith.select %[[IN]], %[[X]], %[[Z]] : f32
// the vector read along a padded dim: one guarded element at a time
// CHECK: %[[R:.*]] = vector.transfer_read %[[SRC]][%{{.*}}, %{{.*}}], %{{.*}} {in_bounds = [true]} : memref<4x6xf32>, vector<1xf32>
// CHECK: arith.select %{{.*}}, %[[R]], %{{.*}} : vector<1xf32>
// CHECK: arith.constant dense<0.000000e+00> : vector<4xf32>
// CHECK: vector.extract %{{.*}}[0] : f32 from vector<1xf32>
// CHECK: vector.insert %{{.*}}, %{{.*}} [0] : f32 into vector<4xf32>
// CHECK-COUNT-3: vector.insert %{{.*}} : f32 into vector<4xf32>
// through a subview, a 2-D read: 2 rows x 4 elements
// CHECK-COUNT-8: vector.insert %{{.*}} : f32 into vector<2x4xf32>
// CHECK-NOT: memref.dealloc
// CHECK: return %[[L]]
func.func @pad(%src: memref<4x6xf32>, %i: index, %j: index) -> (f32, vector<4xf32>, vector<2x4xf32>) {
  %cst = arith.constant 0.0 : f32
  %c0 = arith.constant 0 : index
  %alloc = memref.alloc() : memref<6x8xf32>
  linalg.fill ins(%cst : f32) outs(%alloc : memref<6x8xf32>)
  %sv = memref.subview %alloc[1, 1] [4, 6] [1, 1] : memref<6x8xf32> to memref<4x6xf32, strided<[8, 1], offset: 9>>
  memref.copy %src, %sv : memref<4x6xf32> to memref<4x6xf32, strided<[8, 1], offset: 9>>
  %l = memref.load %alloc[%i, %j] : memref<6x8xf32>
  %v = vector.transfer_read %alloc[%i, %c0], %cst {in_bounds = [true]} : memref<6x8xf32>, vector<4xf32>
  %t = memref.subview %alloc[%i, 0] [2, 8] [1, 1] : memref<6x8xf32> to memref<2x8xf32, strided<[8, 1], offset: ?>>
  %w = vector.transfer_read %t[%c0, %j], %cst {in_bounds = [true, true], permutation_map = affine_map<(d0, d1) -> (d0, d1)>} : memref<2x8xf32, strided<[8, 1], offset: ?>>, vector<2x4xf32>
  memref.dealloc %alloc : memref<6x8xf32>
  return %l, %v, %w : f32, vector<4xf32>, vector<2x4xf32>
}

// Not a padded copy (nothing copied into the interior): left alone.
// CHECK-LABEL: func.func @no_copy(
// CHECK: memref.alloc() : memref<8xf32>
// CHECK: linalg.fill
// CHECK: memref.load
func.func @no_copy(%i: index) -> f32 {
  %cst = arith.constant 0.0 : f32
  %alloc = memref.alloc() : memref<8xf32>
  linalg.fill ins(%cst : f32) outs(%alloc : memref<8xf32>)
  %l = memref.load %alloc[%i] : memref<8xf32>
  return %l : f32
}

// -----

// Only reads of a padded buffer can be guarded.
// ERR: error: padded buffer used by 'memref.store' (only reads can be guarded)
func.func @store(%src: memref<4xf32>, %i: index, %x: f32) {
  %cst = arith.constant 0.0 : f32
  %alloc = memref.alloc() : memref<6xf32>
  linalg.fill ins(%cst : f32) outs(%alloc : memref<6xf32>)
  %sv = memref.subview %alloc[1] [4] [1] : memref<6xf32> to memref<4xf32, strided<[1], offset: 1>>
  memref.copy %src, %sv : memref<4xf32> to memref<4xf32, strided<[1], offset: 1>>
  memref.store %x, %alloc[%i] : memref<6xf32>
  return
}
