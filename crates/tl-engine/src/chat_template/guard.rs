//! Guards around the template instructions that can make a render expensive.
//!
//! minijinja lets us replace functions and filters, not operators: `~`, `+`
//! and `*` build strings and lists, `==`, `in`, `x[i]` and slices walk them,
//! literals and `{% set ns.x = … %}` assemble them, and `{{ … }}` writes them,
//! all inside its VM. So once a template is compiled we rewrite its bytecode
//! (minijinja's `unstable_machinery` API): each such instruction becomes a jump
//! to a stub at the end of the program that calls a guard with the
//! instruction's operands, runs the original instruction on the operands the
//! guard hands back unchanged, and jumps back. A guard charges the work the
//! instruction is about to do to the render's [`RenderBudget`] and fails the
//! render first when the budget would run out. Guard names are not
//! identifiers, so a template cannot shadow them.
//!
//! Not guarded: a comparison, lookup or `in` whose other operand is a short
//! constant pushed just before it (`role == 'user'`, `message['content']`,
//! `x in ['a', 'b']`), which costs little whatever the first operand is;
//! about half of a real template's operations. `loop.changed(…)`, which
//! compares its arguments with the last call's, is guarded like `==`.
//!
//! The stubs keep the original instruction, so rendering is unchanged: the
//! test data renders byte-identical with and without them. This code knows
//! minijinja 3.0.5's instruction set, which is why the workspace pins it.
//! Each render guards a fresh copy of the bytecode compiled at load time.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use minijinja::machinery::{CompiledTemplate, Instruction, Instructions};
use minijinja::value::{Rest, Value, ValueKind, ValueOrKwargs};
use minijinja::{Environment, Error};

use super::limits::{is_scalar, limit_error, RenderBudget, ELEMENT_UNITS};

const CONCAT: &str = "tl guard ~";
const ADD: &str = "tl guard +";
const MUL: &str = "tl guard *";
const COMPARE: &str = "tl guard compare";
const CONTAINS: &str = "tl guard in";
const ITEM: &str = "tl guard item";
const SLICE: &str = "tl guard slice";
const BUILD: &str = "tl guard build";
const ASSIGN: &str = "tl guard assign";
const WALK: &str = "tl guard walk";
const EMIT: &str = "tl guard emit";

/// What a stub does before the original instruction.
enum Stub {
    /// Call `guard` with the instruction's `operands` stack values; the guard
    /// returns them reversed and `UnpackList` puts them back.
    Operands { guard: &'static str, operands: u16 },
    /// `{{ value }}`: the guard returns the value itself.
    Emit,
    /// Template text: pushed as a constant and written like `{{ }}` output.
    RawText(String),
}

/// The bytecode of a template and its blocks.
pub(crate) type Program<'source> = (
    Instructions<'source>,
    BTreeMap<&'source str, Instructions<'source>>,
);

/// A guarded copy of `compiled`'s bytecode (the original stays as it is, to
/// be copied for the next render).
pub(crate) fn guarded_program<'source>(
    compiled: &CompiledTemplate<'source>,
) -> Result<Program<'source>, String> {
    let mut instructions = copy(&compiled.instructions);
    guard_instructions(&mut instructions)?;
    let mut blocks = BTreeMap::new();
    for (name, block) in &compiled.blocks {
        let mut block = copy(block);
        guard_instructions(&mut block)?;
        blocks.insert(*name, block);
    }
    Ok((instructions, blocks))
}

/// A copy of `instructions`, with their lines.
fn copy<'source>(instructions: &Instructions<'source>) -> Instructions<'source> {
    let mut copy = Instructions::new(instructions.name(), instructions.source());
    let mut pc = 0;
    while let Some(instruction) = instructions.get(pc) {
        copy.add_with_line(instruction.clone(), line_of(instructions, pc));
        pc += 1;
    }
    copy
}

/// Rewrites `instructions` so that every costly instruction passes its guard;
/// refuses templates using call splats (`f(*args)`, `f(**kwargs)`), whose
/// argument copies are not worth guarding in chat templates.
fn guard_instructions(instructions: &mut Instructions<'_>) -> Result<(), String> {
    let end = program_len(instructions);
    let end_line = line_of(instructions, end.saturating_sub(1));
    // Jumps to the old end (out of a final loop or `if`) must still end the
    // program, not run the first stub.
    instructions.add_with_line(Instruction::Jump(u32::MAX), end_line);
    let targets = jump_targets(instructions, end);
    for pc in 0..end {
        let Some(original) = instructions.get(pc).cloned() else {
            break;
        };
        let Some(stub) = stub_for(&original)? else {
            continue;
        };
        // The operand pushed just before, when no jump lands between.
        let operand = pc
            .checked_sub(1)
            .filter(|_| !targets.contains(&pc))
            .and_then(|before| instructions.get(before));
        if operand.is_some_and(|operand| bounded_by_constant(&original, operand)) {
            continue;
        }
        let line = line_of(instructions, pc);
        let start = emit_stub(instructions, stub, original, line);
        instructions.add_with_line(Instruction::Jump(pc + 1), line);
        if let Some(slot) = instructions.get_mut(pc) {
            *slot = Instruction::Jump(start);
        }
    }
    Ok(())
}

/// Instructions that control can reach other than from the one before: jump
/// targets, macro bodies, and what follows a call (recursive loops resume
/// there).
fn jump_targets(instructions: &Instructions<'_>, end: u32) -> HashSet<u32> {
    let mut targets = HashSet::new();
    for pc in 0..end {
        match instructions.get(pc) {
            Some(
                Instruction::Jump(target)
                | Instruction::JumpIfFalse(target)
                | Instruction::JumpIfFalseOrPop(target)
                | Instruction::JumpIfTrueOrPop(target)
                | Instruction::Iterate(target)
                | Instruction::BuildMacro(_, target, _),
            ) => {
                targets.insert(*target);
            }
            Some(
                Instruction::CallFunction(..)
                | Instruction::CallMethod(..)
                | Instruction::CallObject(..)
                | Instruction::FastRecurse
                | Instruction::PushLoop(_),
            ) => {
                targets.insert(pc + 1);
            }
            _ => {}
        }
    }
    targets
}

/// Whether `instruction` costs little whatever its other operand, because
/// `operand`, the constant pushed right before it, is small: comparing with
/// a short string or a number, looking up a short key or a small index, or
/// searching a short literal list.
fn bounded_by_constant(instruction: &Instruction<'_>, operand: &Instruction<'_>) -> bool {
    const SHORT: usize = 1024;
    const FEW: usize = 64;
    let Instruction::LoadConst(constant) = operand else {
        return false;
    };
    let short_text = constant.as_str().is_some_and(|text| text.len() <= SHORT);
    let small =
        short_text || is_scalar(constant) && !matches!(constant.kind(), ValueKind::Undefined);
    match instruction {
        Instruction::Eq
        | Instruction::Ne
        | Instruction::Lt
        | Instruction::Lte
        | Instruction::Gt
        | Instruction::Gte
        | Instruction::CompareAndPreserve(_) => small,
        Instruction::GetItem => {
            short_text || constant.as_usize().is_some_and(|index| index <= SHORT)
        }
        Instruction::In => {
            matches!(constant.kind(), ValueKind::Seq | ValueKind::Map)
                && constant.len().is_some_and(|len| len <= FEW)
                && constant.try_iter().is_ok_and(|mut items| {
                    items.all(|item| {
                        is_scalar(&item) || item.as_str().is_some_and(|text| text.len() <= SHORT)
                    })
                })
        }
        _ => false,
    }
}

fn stub_for(instruction: &Instruction<'_>) -> Result<Option<Stub>, String> {
    let operands = |guard, count: usize| {
        u16::try_from(count)
            .map(|operands| Some(Stub::Operands { guard, operands }))
            .map_err(|_| format!("a literal with {count} values is too large"))
    };
    match instruction {
        Instruction::StringConcat => operands(CONCAT, 2),
        Instruction::Add => operands(ADD, 2),
        Instruction::Mul => operands(MUL, 2),
        Instruction::Eq
        | Instruction::Ne
        | Instruction::Lt
        | Instruction::Lte
        | Instruction::Gt
        | Instruction::Gte
        | Instruction::CompareAndPreserve(_) => operands(COMPARE, 2),
        Instruction::In => operands(CONTAINS, 2),
        Instruction::GetItem => operands(ITEM, 2),
        Instruction::Slice => operands(SLICE, 4),
        Instruction::BuildList(Some(count)) | Instruction::BuildTuple(Some(count))
            if *count > 0 =>
        {
            operands(BUILD, *count)
        }
        Instruction::BuildMap(pairs) | Instruction::BuildKwargs(pairs) if *pairs > 0 => {
            operands(BUILD, pairs.saturating_mul(2))
        }
        Instruction::SetAttr(_) => operands(ASSIGN, 2),
        // `loop.changed(values)` compares them with the last call's.
        Instruction::CallMethod("changed", Some(count)) => operands(WALK, usize::from(*count)),
        Instruction::Emit => Ok(Some(Stub::Emit)),
        Instruction::EmitRaw(text) => Ok(Some(Stub::RawText((*text).to_owned()))),
        Instruction::UnpackLists(_) | Instruction::MergeKwargs(_) => {
            Err("argument splats (`*args`, `**kwargs`) are not supported".to_owned())
        }
        _ => Ok(None),
    }
}

/// Appends the stub and the original instruction; returns where it starts.
fn emit_stub<'source>(
    instructions: &mut Instructions<'source>,
    stub: Stub,
    original: Instruction<'source>,
    line: u16,
) -> u32 {
    match stub {
        Stub::Operands { guard, operands } => {
            let start =
                instructions.add_with_line(Instruction::CallFunction(guard, Some(operands)), line);
            instructions.add_with_line(Instruction::UnpackList(usize::from(operands)), line);
            instructions.add_with_line(original, line);
            start
        }
        Stub::Emit => {
            let start = instructions.add_with_line(Instruction::CallFunction(EMIT, Some(1)), line);
            instructions.add_with_line(original, line);
            start
        }
        Stub::RawText(text) => {
            let start = instructions.add_with_line(Instruction::LoadConst(Value::from(text)), line);
            instructions.add_with_line(Instruction::CallFunction(EMIT, Some(1)), line);
            instructions.add_with_line(Instruction::Emit, line);
            start
        }
    }
}

fn program_len(instructions: &Instructions<'_>) -> u32 {
    let mut len = 0;
    while instructions.get(len).is_some() {
        len += 1;
    }
    len
}

fn line_of(instructions: &Instructions<'_>, pc: u32) -> u16 {
    instructions
        .get_line(pc)
        .and_then(|line| u16::try_from(line).ok())
        .unwrap_or(0)
}

/// Registers the guards of one render, each charging `budget`.
pub(crate) fn register_guards(environment: &mut Environment<'_>, budget: &Arc<RenderBudget>) {
    type Check = fn(&RenderBudget, &[Value]) -> Result<(), Error>;
    let passes: [(&'static str, Check); 10] = [
        (CONCAT, check_concat),
        (ADD, check_add),
        (MUL, check_mul),
        (COMPARE, check_compare),
        (CONTAINS, check_contains),
        (ITEM, check_item),
        (SLICE, check_slice),
        (BUILD, check_build),
        (ASSIGN, check_assign),
        (WALK, check_walk),
    ];
    for (name, check) in passes {
        let budget = Arc::clone(budget);
        environment.add_function(name, move |operands: Rest<ValueOrKwargs>| {
            let operands = operands.into_values();
            check(&budget, &operands)?;
            // Reversed, so that `UnpackList` leaves them as they were.
            Ok::<_, Error>(Value::from_iter(operands.into_iter().rev()))
        });
    }
    let budget = Arc::clone(budget);
    environment.add_function(EMIT, move |value: Value| {
        let bytes = budget.display_len(&value)?;
        budget.charge_output(bytes)?;
        Ok::<_, Error>(value)
    });
}

/// `a ~ b`: prints both and copies them into a new string.
fn check_concat(budget: &RenderBudget, operands: &[Value]) -> Result<(), Error> {
    let mut bytes = 0u64;
    for operand in operands {
        bytes = bytes.saturating_add(budget.display_len(operand)?);
    }
    budget.charge_work(bytes)
}

/// `a + b`: strings are copied, lists and tuples joined.
fn check_add(budget: &RenderBudget, operands: &[Value]) -> Result<(), Error> {
    let [left, right] = operands else {
        return Ok(());
    };
    if let (Some(left), Some(right)) = (left.as_str(), right.as_str()) {
        return budget.charge_work((left.len() as u64).saturating_add(right.len() as u64));
    }
    if is_sequence(left) && is_sequence(right) {
        let len = budget
            .top_level_len(left)?
            .saturating_add(budget.top_level_len(right)?);
        budget.check_elements(len)?;
        return budget.charge_work((len as u64).saturating_mul(ELEMENT_UNITS));
    }
    Ok(())
}

/// `s * n` and `list * n`: the result is checked before it is built.
fn check_mul(budget: &RenderBudget, operands: &[Value]) -> Result<(), Error> {
    let [left, right] = operands else {
        return Ok(());
    };
    let (repeated, count) = if matches!(right.kind(), ValueKind::Number) {
        (left, right)
    } else {
        (right, left)
    };
    let Some(count) = count.as_usize() else {
        return Ok(());
    };
    if let Some(text) = repeated.as_str() {
        return budget.charge_work((text.len() as u64).saturating_mul(count as u64));
    }
    if is_sequence(repeated) {
        let len = budget.top_level_len(repeated)?.saturating_mul(count);
        budget.check_elements(len)?;
        return budget.charge_work((len as u64).saturating_mul(ELEMENT_UNITS));
    }
    Ok(())
}

/// `a == b`, `a < b`, …: strings compare byte by byte, containers element
/// by element (shared parts once per path, as the comparison walks them).
fn check_compare(budget: &RenderBudget, operands: &[Value]) -> Result<(), Error> {
    let [left, right] = operands else {
        return Ok(());
    };
    budget.charge_work(comparison_cost(budget, left, right)?)
}

/// Work comparing `left` with `right` costs, walking containers as needed.
pub(crate) fn comparison_cost(
    budget: &RenderBudget,
    left: &Value,
    right: &Value,
) -> Result<u64, Error> {
    if let (Some(left), Some(right)) = (left.as_str(), right.as_str()) {
        return Ok(left.len().min(right.len()) as u64 + 1);
    }
    if is_scalar(left) || is_scalar(right) || left.kind() != right.kind() {
        return Ok(1);
    }
    // Both containers (the walks are charged by `measure` itself).
    budget.measure(left)?;
    budget.measure(right)?;
    Ok(1)
}

/// `item in container`.
fn check_contains(budget: &RenderBudget, operands: &[Value]) -> Result<(), Error> {
    let [item, container] = operands else {
        return Ok(());
    };
    budget.charge_work(containment_cost(budget, item, container)?)
}

/// Work `item in container` costs: a substring search, a key lookup, or a
/// comparison with every element.
pub(crate) fn containment_cost(
    budget: &RenderBudget,
    item: &Value,
    container: &Value,
) -> Result<u64, Error> {
    if let Some(text) = container.as_str() {
        let needle = item.as_str().map_or(0, str::len);
        return Ok((text.len() as u64).saturating_add(needle as u64));
    }
    match container.kind() {
        ValueKind::Map => {
            if !is_scalar(item) && item.as_str().is_none() {
                budget.measure(item)?;
            }
            Ok(item.as_str().map_or(1, |key| key.len() as u64 + 1))
        }
        ValueKind::Seq | ValueKind::Iterable => {
            budget.measure(container)?;
            if !is_scalar(item) && item.as_str().is_none() {
                let per_element = budget.measure(item)?.units();
                let len = budget.top_level_len(container)? as u64;
                return Ok(per_element.saturating_mul(len));
            }
            Ok(1)
        }
        _ => Ok(1),
    }
}

/// `container[key]`: a string is indexed by characters, a lazy sequence
/// walked to the index, a map searched for the key.
fn check_item(budget: &RenderBudget, operands: &[Value]) -> Result<(), Error> {
    let [container, key] = operands else {
        return Ok(());
    };
    if let Some(text) = container.as_str() {
        return budget.charge_work(text.len() as u64);
    }
    match container.kind() {
        ValueKind::Iterable => budget.top_level_len(container).map(|_| ()),
        ValueKind::Map if !is_scalar(key) && key.as_str().is_none() => {
            budget.measure(key).map(|_| ())
        }
        _ => Ok(()),
    }
}

/// `container[start:stop:step]`: walks and copies up to the whole container.
fn check_slice(budget: &RenderBudget, operands: &[Value]) -> Result<(), Error> {
    let Some(container) = operands.first() else {
        return Ok(());
    };
    if let Some(text) = container.as_str() {
        return budget.charge_work((text.len() as u64).saturating_mul(2));
    }
    if is_sequence(container) {
        budget.top_level_len(container)?;
    }
    Ok(())
}

/// `[a, b]`, `(a, b)`, `{k: v}` and keyword arguments: the new value holds its
/// parts, so their nesting and size add up.
fn check_build(budget: &RenderBudget, parts: &[Value]) -> Result<(), Error> {
    budget.check_elements(parts.len())?;
    budget.charge_work((parts.len() as u64).saturating_mul(ELEMENT_UNITS))?;
    let mut elements = 1usize;
    let mut depth = 1usize;
    for part in parts {
        if is_scalar(part) || part.as_str().is_some() {
            elements += 1;
            continue;
        }
        let shape = budget.measure(part)?;
        elements = elements.saturating_add(shape.elements);
        depth = depth.max(shape.depth + 1);
    }
    budget.check_elements(elements)?;
    budget.check_depth(depth)
}

/// `{% set ns.attr = value %}`: namespaces are the only values a template can
/// change, so they are the only way it could make a value hold itself, which
/// would send printing and comparing into endless recursion. A namespace may
/// therefore not be assigned anything that holds a namespace.
fn check_assign(budget: &RenderBudget, operands: &[Value]) -> Result<(), Error> {
    let Some(value) = operands.first() else {
        return Ok(());
    };
    if is_scalar(value) || value.as_str().is_some() {
        return Ok(());
    }
    let shape = budget.measure(value)?;
    if shape.holds_namespace {
        return Err(limit_error(
            "a namespace attribute may not hold a namespace (it could come to hold itself)",
        ));
    }
    budget.check_depth(shape.depth + 1)
}

/// Values an instruction compares or copies in full (charged by `measure`).
fn check_walk(budget: &RenderBudget, operands: &[Value]) -> Result<(), Error> {
    operands
        .iter()
        .filter(|operand| !is_scalar(operand))
        .try_for_each(|operand| budget.measure(operand).map(drop))
}

fn is_sequence(value: &Value) -> bool {
    matches!(value.kind(), ValueKind::Seq | ValueKind::Iterable)
}
