// RUN: %ansor-opt %s -split-input-file -allow-unregistered-dialect -verify-diagnostics | FileCheck %s
// RUN: %ansor-opt %s -split-input-file -allow-unregistered-dialect -verify-diagnostics \
// RUN:   | %ansor-opt -split-input-file -allow-unregistered-dialect | FileCheck %s

// `weight` and `flops` default to i64 when written without a type and print with it.
// CHECK-LABEL: func.func @round_trip
// CHECK-SAME: ansor.task = #ansor.task<name = "round_trip", weight = 2 : i64, flops = 2147483648 : i64, hash = "00ff00ff00ff00ff">
func.func @round_trip() attributes {
    ansor.task = #ansor.task<name = "round_trip", weight = 2, flops = 2147483648 : i64, hash = "00ff00ff00ff00ff">} {
  return
}

// -----

// CHECK-LABEL: func.func @loop_pragma
// CHECK: ansor.auto_unroll_max_step = 16 : i64
func.func @loop_pragma(%n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %n step %c1 {
  } {ansor.auto_unroll_max_step = 16 : i64}
  return
}

// -----

// Other ansor.* attributes are free-form.
// CHECK-LABEL: func.func @other_attr
// CHECK-SAME: ansor.whatever = "x"
func.func @other_attr() attributes {ansor.whatever = "x"} {
  return
}

// -----

// expected-error @+1 {{'use.it' op 'ansor.task' is only valid on 'func.func'}}
"use.it"() {ansor.task = #ansor.task<name = "f", weight = 1, flops = 0, hash = "0">} : () -> ()

// -----

// expected-error @+1 {{'func.func' op 'ansor.task' must be a #ansor.task attribute, got 3 : i64}}
func.func @not_a_task() attributes {ansor.task = 3} {
  return
}

// -----

// expected-error @+1 {{#ansor.task: 'weight' must be >= 1, got 0}}
func.func @zero_weight() attributes {ansor.task = #ansor.task<name = "f", weight = 0, flops = 1, hash = "0">} {
  return
}

// -----

// expected-error @+1 {{#ansor.task: 'flops' must be >= 0, got -5}}
func.func @negative_flops() attributes {ansor.task = #ansor.task<name = "f", weight = 1, flops = -5, hash = "0">} {
  return
}

// -----

// expected-error @+1 {{#ansor.task: 'weight' must be an i64 integer}}
func.func @i32_weight() attributes {ansor.task = #ansor.task<name = "f", weight = 1 : i32, flops = 1, hash = "0">} {
  return
}

// -----

// expected-error @+1 {{#ansor.task: 'name' must not be empty}}
func.func @empty_name() attributes {ansor.task = #ansor.task<name = "", weight = 1, flops = 1, hash = "0">} {
  return
}

// -----

// expected-error @+1 {{'use.it' op 'ansor.auto_unroll_max_step' must be attached to an operation with regions (a loop)}}
"use.it"() {ansor.auto_unroll_max_step = 4 : i64} : () -> ()

// -----

func.func @negative_step(%n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  // expected-error @+1 {{'scf.for' op 'ansor.auto_unroll_max_step' must be non-negative, got -1}}
  scf.for %i = %c0 to %n step %c1 {
  } {ansor.auto_unroll_max_step = -1 : i64}
  return
}

// -----

func.func @string_step(%n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  // expected-error @+1 {{'scf.for' op 'ansor.auto_unroll_max_step' must be an integer attribute, got "8"}}
  scf.for %i = %c0 to %n step %c1 {
  } {ansor.auto_unroll_max_step = "8"}
  return
}
