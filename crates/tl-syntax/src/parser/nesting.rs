//! Bounds the height of the syntax tree, so no input can overflow the stack: not
//! the parser's recursion, and not the recursive walks that come after it (drop,
//! the checker, the interpreter).
//!
//! Recursion alone is not enough to count: `1 + 1 + … + 1` and `a.b.c.…` build
//! left-deep trees in a loop. So `depth` is a height budget rather than a call
//! depth. A construct that parses its children recursively calls [`Parser::enter`]
//! (one level). A loop that wraps what it has built so far (a "chain": binary
//! operators, postfix operators) calls [`Parser::chain_link`] before each new
//! link, which moves `depth` above the deepest level the chain has reached
//! (`peak`), since the new node sits on top of all of it. Every tree then has a
//! height at most `peak - depth + 1` of the parse that built it.
//!
//! Two bounds follow. The parser's own recursion grows only with `levels`, the
//! constructs opened by [`Parser::enter`] and not yet left: that stays under
//! [`MAX_NESTING`]. The walks after parsing recurse once per level of the tree
//! whatever built it, but a chain link costs them far less stack than a nested
//! construct costs the parser, so `depth` (the height) has its own, larger
//! bound [`MAX_HEIGHT`]: a flat chain of a thousand `+` is fine, while a
//! thousand nested parentheses are not.
//!
//! After an error the counters are left unbalanced; that is fine because the
//! parser stops at the first error.

use super::cursor::Parser;
use crate::parse_error::ParseError;

/// The deepest nesting accepted. Real code stays far below it; the bound is set
/// by stack use: at this depth the worst input (nested struct literals) needs
/// about 1 MB of stack in an unoptimized build and 0.25 MB optimized, so parsing
/// fits in a default 2 MB thread in any build.
pub(super) const MAX_NESTING: usize = 128;

/// The tallest syntax tree accepted, counting each link of a chain as a level.
/// A left-deep chain this tall checks and runs on the interpreter's thread
/// (512 MiB of stack, where `tl check` and `tl run` also check), which
/// `a_chain_of_thousands_of_operators_checks_and_runs` in tl-cli tests.
pub(super) const MAX_HEIGHT: usize = 4096;

/// The current level and the deepest level reached by the current chain, and
/// how many constructs are open.
#[derive(Debug, Default)]
pub(super) struct Nesting {
    depth: usize,
    peak: usize,
    levels: usize,
}

/// Where a chain started, to restore when it ends.
#[must_use]
pub(super) struct ChainStart {
    depth: usize,
    peak: usize,
}

impl Parser<'_> {
    /// One level deeper; fails past [`MAX_NESTING`].
    pub(super) fn enter(&mut self) -> Result<(), ParseError> {
        self.nesting.depth += 1;
        self.nesting.levels += 1;
        self.nesting.peak = self.nesting.peak.max(self.nesting.depth);
        self.check_nesting()
    }

    /// Back out of the level [`Self::enter`] opened.
    pub(super) fn leave(&mut self) {
        self.nesting.depth = self.nesting.depth.saturating_sub(1);
        self.nesting.levels = self.nesting.levels.saturating_sub(1);
    }

    /// Starts a loop that wraps the node built so far.
    pub(super) fn chain_start(&mut self) -> ChainStart {
        let start = ChainStart {
            depth: self.nesting.depth,
            peak: self.nesting.peak,
        };
        self.nesting.peak = self.nesting.depth;
        start
    }

    /// Before parsing the next link of a chain: the new node sits above
    /// everything the chain built so far.
    pub(super) fn chain_link(&mut self) -> Result<(), ParseError> {
        self.nesting.depth = self.nesting.peak + 1;
        self.nesting.peak = self.nesting.depth;
        self.check_nesting()
    }

    /// Ends a chain, keeping its peak for the enclosing one.
    pub(super) fn chain_end(&mut self, start: ChainStart) {
        self.nesting.depth = start.depth;
        self.nesting.peak = self.nesting.peak.max(start.peak);
    }

    fn check_nesting(&self) -> Result<(), ParseError> {
        let message = if self.nesting.levels > MAX_NESTING {
            "expression nested too deeply"
        } else if self.nesting.depth > MAX_HEIGHT {
            "expression too long"
        } else {
            return Ok(());
        };
        Err(ParseError::new(message, self.peek().span)
            .with_hint("split it into smaller parts with `let`"))
    }
}
