//! `sqlmut`: the SQL mutants of a reference solution, for `.ci/mutants-sql`.
//!
//!     sqlmut FILE OUT [--dialect sqlite|postgres]
//!
//! Finds every SQL string in the Rust file FILE, parses it with a real SQL
//! parser, and writes one mutant of FILE per change to OUT/NNN.rs, with
//! OUT/index.tsv (`NNN<TAB>line<TAB>viable|unviable<TAB>what changed`),
//! OUT/reprinted.rs (every statement reprinted by the parser, unchanged: the
//! control, which must pass its check as the reference does) and
//! OUT/unhandled.txt (the SQL strings no mutant was made of, and why).
//!
//! The changes:
//! - each conjunct of an `AND` dropped (in `WHERE`, `ON`, anywhere), and a
//!   `WHERE` or `ON` of a single condition dropped whole;
//! - `<`/`<=`, `>`/`>=` and `=`/`<>` flipped;
//! - `LIMIT`, `ORDER BY`, each `RETURNING` column, `FOR UPDATE` and
//!   `SKIP LOCKED` dropped;
//! - each status literal (a quoted word in capitals, such as 'PENDING')
//!   swapped for each other one the file's SQL uses;
//! - each assignment of an `UPDATE ... SET` dropped;
//! - `DO UPDATE` turned into `DO NOTHING`, and `INSERT OR IGNORE` (or
//!   `OR REPLACE`) into a plain `INSERT`;
//! - `BEGIN IMMEDIATE` (or `EXCLUSIVE`) turned into `BEGIN`.
//!
//! A `format!` string is mutated too: a `{NAME}` whose NAME is a `const` string
//! of the file is put in its place (so a fence kept in a const is mutated
//! where one statement uses it), and any other `{...}` stands for a value the
//! parser sees as a column. A mutant is "unviable" when, with SQLite, its
//! statement does not prepare against the file's schema (its `CREATE`
//! strings) while the unmutated statement does.

use std::collections::{BTreeSet, HashMap};
use std::fmt::Write as _;
use std::ops::ControlFlow;
use std::path::Path;

use anyhow::{bail, Context, Result};
use proc_macro2::{Delimiter, TokenStream, TokenTree};
use sqlparser::ast::{
    BinaryOperator, Expr, JoinConstraint, JoinOperator, OnConflictAction, OnInsert, Query, Select,
    Statement, Value, ValueWithSpan, VisitMut, Visitor, VisitorMut,
};
use sqlparser::dialect::{Dialect, PostgreSqlDialect, SQLiteDialect};
use sqlparser::parser::Parser;

fn main() {
    if let Err(err) = run() {
        eprintln!("sqlmut: {err:#}");
        std::process::exit(2);
    }
}

fn run() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (file, out, dialect) = match args.as_slice() {
        [file, out] => (file, out, "sqlite"),
        [file, out, flag, dialect] if flag == "--dialect" => (file, out, dialect.as_str()),
        _ => bail!("usage: sqlmut FILE OUT [--dialect sqlite|postgres]"),
    };
    let sqlite = dialect == "sqlite";
    let dialect: Box<dyn Dialect> = match dialect {
        "sqlite" => Box::new(SQLiteDialect {}),
        "postgres" => Box::new(PostgreSqlDialect {}),
        other => bail!("unknown dialect '{other}': sqlite or postgres"),
    };
    let source = std::fs::read_to_string(file).with_context(|| format!("could not read {file}"))?;
    let out = Path::new(out);
    std::fs::create_dir_all(out).with_context(|| format!("could not create {}", out.display()))?;
    let found = Strings::find(&source)?;
    let schema = Schema::new(&found, sqlite);

    let mut sql = Vec::new();
    let mut unhandled = String::new();
    for literal in &found.literals {
        match Sql::parse(literal, &found.consts, dialect.as_ref()) {
            Ok(Some(parsed)) => sql.push(parsed),
            Ok(None) => {}
            Err(why) => writeln!(unhandled, "line {}: {why}", literal.line)?,
        }
    }
    let statuses: BTreeSet<String> = sql.iter().flat_map(|s| s.statuses()).collect();
    let statuses: Vec<String> = statuses.into_iter().collect();

    // The control: every statement reprinted, none changed.
    let mut reprinted = source.clone();
    for s in sql.iter().rev() {
        reprinted.replace_range(s.literal.span.clone(), &s.rust(&s.statements));
    }
    std::fs::write(out.join("reprinted.rs"), reprinted)?;

    let mut index = String::new();
    let mut n = 0;
    for s in &sql {
        let prepares = schema.prepares(s, &s.statements);
        for (k, statement) in s.statements.iter().enumerate() {
            let mut sites = Sites::count(&statuses);
            let _ = statement.clone().visit(&mut sites);
            for (target, what) in sites.found.into_iter().enumerate() {
                let mut mutated = s.statements.clone();
                let mut apply = Sites::apply(&statuses, target);
                let _ = mutated[k].visit(&mut apply);
                if mutated == s.statements {
                    continue;
                }
                n += 1;
                let viable = !prepares || schema.prepares(s, &mutated);
                let mut text = source.clone();
                text.replace_range(s.literal.span.clone(), &s.rust(&mutated));
                std::fs::write(out.join(format!("{n:03}.rs")), text)?;
                let viable = if viable { "viable" } else { "unviable" };
                let what = what.replace(['\t', '\n'], " ");
                writeln!(index, "{n:03}\t{}\t{viable}\t{what}", s.literal.line)?;
            }
        }
    }
    std::fs::write(out.join("index.tsv"), index)?;
    std::fs::write(out.join("unhandled.txt"), unhandled)?;
    println!("{n} SQL mutants of {} statements in {file}", sql.len());
    Ok(())
}

/// A string literal of the Rust file.
struct Literal {
    value: String,
    /// Where the literal's source text sits in the file, quotes included.
    span: std::ops::Range<usize>,
    line: usize,
    /// Inside a `format!`-like macro: `{...}` are its arguments.
    formatted: bool,
}

/// The string literals of a file, and its `const NAME: &str = "..."` values.
struct Strings {
    literals: Vec<Literal>,
    consts: HashMap<String, String>,
}

impl Strings {
    fn find(source: &str) -> Result<Strings> {
        let tokens: TokenStream = source
            .parse()
            .map_err(|e| anyhow::anyhow!("the file does not lex as Rust: {e}"))?;
        let mut strings = Strings {
            literals: Vec::new(),
            consts: HashMap::new(),
        };
        strings.walk(source, tokens, false);
        Ok(strings)
    }

    fn walk(&mut self, source: &str, tokens: TokenStream, formatted: bool) {
        let tokens: Vec<TokenTree> = tokens.into_iter().collect();
        for (i, token) in tokens.iter().enumerate() {
            match token {
                TokenTree::Group(group) => {
                    // `format!(...)`: the group follows a `!` that follows the
                    // macro's name.
                    let named = |name: &str| {
                        i >= 2
                            && matches!(&tokens[i - 1], TokenTree::Punct(p) if p.as_char() == '!')
                            && matches!(&tokens[i - 2], TokenTree::Ident(id) if id == name)
                    };
                    let format = group.delimiter() != Delimiter::None
                        && ["format", "write", "writeln", "print", "println", "panic"]
                            .iter()
                            .any(|name| named(name));
                    self.walk(source, group.stream(), format);
                }
                TokenTree::Literal(literal) => {
                    let Ok(lit) =
                        syn::parse2::<syn::LitStr>(TokenTree::Literal(literal.clone()).into())
                    else {
                        continue;
                    };
                    let span = literal.span().byte_range();
                    // A doc comment is a literal too, to the lexer.
                    if !source[span.clone()].starts_with(['"', 'r']) {
                        continue;
                    }
                    let value = lit.value();
                    // `const NAME: &str = "..."`
                    if i >= 6
                        && matches!(&tokens[i - 6], TokenTree::Ident(id) if id == "const")
                        && matches!(&tokens[i - 2], TokenTree::Ident(id) if id == "str")
                    {
                        if let TokenTree::Ident(name) = &tokens[i - 5] {
                            self.consts.insert(name.to_string(), value.clone());
                        }
                    }
                    self.literals.push(Literal {
                        value,
                        span,
                        line: literal.span().start().line,
                        formatted,
                    });
                }
                _ => {}
            }
        }
    }
}

/// The statements of one SQL string.
struct Sql<'a> {
    literal: &'a Literal,
    statements: Vec<Statement>,
    /// The `{...}` of a format string, by the column name that stands for
    /// each while it is parsed.
    holes: Vec<(String, String)>,
}

const SQL_WORDS: [&str; 9] = [
    "SELECT", "INSERT", "UPDATE", "DELETE", "WITH", "BEGIN", "REPLACE", "START", "CREATE",
];

impl<'a> Sql<'a> {
    /// The string's statements; none for a string that is not SQL.
    fn parse(
        literal: &'a Literal,
        consts: &HashMap<String, String>,
        dialect: &dyn Dialect,
    ) -> std::result::Result<Option<Sql<'a>>, String> {
        let first = literal.value.split_whitespace().next().unwrap_or("");
        let first = first.to_ascii_uppercase();
        if !SQL_WORDS.contains(&first.as_str()) || first == "CREATE" {
            return Ok(None);
        }
        let (text, holes) = match literal.formatted {
            true => unformat(&literal.value, consts),
            false => (literal.value.clone(), Vec::new()),
        };
        let statements = Parser::parse_sql(dialect, &text)
            .map_err(|e| format!("does not parse ({e}): {}", one_line(&literal.value)))?;
        // A statement the parser reprints differently is not mutated: its
        // mutants would differ in more than the change.
        let reprinted = statements
            .iter()
            .map(|s| s.to_string())
            .collect::<Vec<_>>()
            .join(";\n");
        match Parser::parse_sql(dialect, &reprinted) {
            Ok(again) if again == statements => {}
            _ => {
                return Err(format!(
                    "does not reprint as it reads: {}",
                    one_line(&literal.value)
                ))
            }
        }
        Ok(Some(Sql {
            literal,
            statements,
            holes,
        }))
    }

    /// The quoted status words its statements use.
    fn statuses(&self) -> Vec<String> {
        let mut found = Vec::new();
        let _ = sqlparser::ast::Visit::visit(&self.statements, &mut Statuses(&mut found));
        found
    }

    /// The Rust literal for these statements, as a raw string.
    fn rust(&self, statements: &[Statement]) -> String {
        let mut text = statements
            .iter()
            .map(|s| s.to_string())
            .collect::<Vec<_>>()
            .join(";\n");
        if self.literal.formatted {
            text = text.replace('{', "{{").replace('}', "}}");
            for (column, hole) in &self.holes {
                text = text.replace(column, hole);
            }
        }
        let mut hashes = "#".to_string();
        while text.contains(&format!("\"{hashes}")) {
            hashes.push('#');
        }
        format!("r{hashes}\"{text}\"{hashes}")
    }
}

/// A format string as SQL: a `{CONST}` put in its place, any other `{...}`
/// a column name standing for it, `{{` and `}}` as braces.
fn unformat(value: &str, consts: &HashMap<String, String>) -> (String, Vec<(String, String)>) {
    let mut text = String::new();
    let mut holes = Vec::new();
    let mut chars = value.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '{' if chars.peek() == Some(&'{') => {
                chars.next();
                text.push('{');
            }
            '}' if chars.peek() == Some(&'}') => {
                chars.next();
                text.push('}');
            }
            '{' => {
                let inner: String = chars.by_ref().take_while(|&c| c != '}').collect();
                match consts.get(&inner) {
                    Some(value) => text.push_str(value),
                    None => {
                        let column = format!("format_hole_{}", holes.len());
                        text.push_str(&column);
                        holes.push((column, format!("{{{inner}}}")));
                    }
                }
            }
            c => text.push(c),
        }
    }
    (text, holes)
}

fn one_line(sql: &str) -> String {
    let line = sql.split_whitespace().collect::<Vec<_>>().join(" ");
    match line.char_indices().nth(80) {
        Some((at, _)) => format!("{}...", &line[..at]),
        None => line,
    }
}

/// An in-memory SQLite database with the file's schema: whether a statement
/// prepares. Without a schema (or for PostgreSQL), every statement does.
struct Schema(Option<rusqlite::Connection>);

impl Schema {
    fn new(found: &Strings, sqlite: bool) -> Schema {
        if !sqlite {
            return Schema(None);
        }
        let Ok(db) = rusqlite::Connection::open_in_memory() else {
            return Schema(None);
        };
        let mut any = false;
        for literal in &found.literals {
            let first = literal.value.split_whitespace().next().unwrap_or("");
            if first.eq_ignore_ascii_case("CREATE") && db.execute_batch(&literal.value).is_ok() {
                any = true;
            }
        }
        Schema(any.then_some(db))
    }

    fn prepares(&self, sql: &Sql, statements: &[Statement]) -> bool {
        let Some(db) = &self.0 else {
            return true;
        };
        // A hole of a format string stands for a value: a parameter.
        statements.iter().all(|s| {
            let mut text = s.to_string();
            for (column, _) in &sql.holes {
                text = text.replace(column, "?");
            }
            matches!(
                s,
                Statement::StartTransaction { .. } | Statement::Commit { .. }
            ) || db.prepare(&text).is_ok()
        })
    }
}

fn is_status(value: &Value) -> Option<&str> {
    match value {
        Value::SingleQuotedString(s)
            if s.len() >= 3 && s.chars().all(|c| c.is_ascii_uppercase() || c == '_') =>
        {
            Some(s)
        }
        _ => None,
    }
}

struct Statuses<'a>(&'a mut Vec<String>);

impl Visitor for Statuses<'_> {
    type Break = ();

    fn pre_visit_value(&mut self, value: &ValueWithSpan) -> ControlFlow<()> {
        if let Some(s) = is_status(&value.value) {
            self.0.push(s.to_string());
        }
        ControlFlow::Continue(())
    }
}

/// The places a statement can be changed, visited in one fixed order:
/// counted (with what each change would do), or the `target`-th changed.
struct Sites<'a> {
    statuses: &'a [String],
    target: Option<usize>,
    seen: usize,
    found: Vec<String>,
}

impl<'a> Sites<'a> {
    fn count(statuses: &'a [String]) -> Sites<'a> {
        Sites {
            statuses,
            target: None,
            seen: 0,
            found: Vec::new(),
        }
    }

    fn apply(statuses: &'a [String], target: usize) -> Sites<'a> {
        Sites {
            target: Some(target),
            ..Sites::count(statuses)
        }
    }

    /// One more place: whether to change it now (when counting, it is only
    /// written down).
    fn here(&mut self, what: impl FnOnce() -> String) -> bool {
        let now = self.target == Some(self.seen);
        if self.target.is_none() {
            self.found.push(what());
        }
        self.seen += 1;
        now
    }

    fn done(&self) -> ControlFlow<()> {
        match self.target.is_some_and(|t| self.seen > t) {
            true => ControlFlow::Break(()),
            false => ControlFlow::Continue(()),
        }
    }

    /// Each item of a `RETURNING` list dropped (the whole clause, if one).
    fn returning(&mut self, returning: &mut Option<Vec<sqlparser::ast::SelectItem>>) {
        let Some(items) = returning else {
            return;
        };
        if items.len() == 1 {
            if self.here(|| format!("drop RETURNING {}", items[0])) {
                *returning = None;
            }
            return;
        }
        for i in 0..items.len() {
            if self.here(|| format!("drop `{}` from RETURNING", items[i])) {
                items.remove(i);
                return;
            }
        }
    }

    /// A `WHERE` of one condition dropped whole (an `AND`'s conjuncts are
    /// dropped one by one where the expression is visited).
    fn condition(&mut self, selection: &mut Option<Expr>, clause: &str) {
        if let Some(e) = selection {
            if !matches!(
                e,
                Expr::BinaryOp {
                    op: BinaryOperator::And,
                    ..
                }
            ) && self.here(|| format!("drop {clause} {e}"))
            {
                *selection = None;
            }
        }
    }
}

impl VisitorMut for Sites<'_> {
    type Break = ();

    fn pre_visit_statement(&mut self, statement: &mut Statement) -> ControlFlow<()> {
        match statement {
            Statement::Update(update) => {
                if update.assignments.len() > 1 {
                    for i in 0..update.assignments.len() {
                        if self.here(|| format!("drop `SET {}`", update.assignments[i])) {
                            update.assignments.remove(i);
                            break;
                        }
                    }
                }
                self.condition(&mut update.selection, "WHERE");
                self.returning(&mut update.returning);
            }
            Statement::Delete(delete) => {
                self.condition(&mut delete.selection, "WHERE");
                self.returning(&mut delete.returning);
            }
            Statement::Insert(insert) => {
                if let Some(or) = insert.or {
                    if self.here(|| format!("drop `OR {or}` from INSERT")) {
                        insert.or = None;
                    }
                }
                if let Some(OnInsert::OnConflict(conflict)) = &mut insert.on {
                    if matches!(conflict.action, OnConflictAction::DoUpdate(_))
                        && self.here(|| "`ON CONFLICT DO UPDATE` becomes `DO NOTHING`".into())
                    {
                        conflict.action = OnConflictAction::DoNothing;
                    }
                }
                self.returning(&mut insert.returning);
            }
            Statement::StartTransaction { modifier, .. } => {
                if let Some(m) = *modifier {
                    if self.here(|| format!("`BEGIN {m}` becomes `BEGIN`")) {
                        *modifier = None;
                    }
                }
            }
            _ => {}
        }
        self.done()
    }

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        if let Some(order) = &query.order_by {
            if self.here(|| format!("drop {order}")) {
                query.order_by = None;
            }
        }
        if let Some(limit) = &query.limit_clause {
            if self.here(|| format!("drop {}", limit.to_string().trim())) {
                query.limit_clause = None;
            }
        }
        for i in 0..query.locks.len() {
            if query.locks[i].nonblock.is_some()
                && self.here(|| {
                    format!(
                        "drop `{:?}` from {}",
                        query.locks[i].nonblock, query.locks[i]
                    )
                })
            {
                query.locks[i].nonblock = None;
            }
            if self.here(|| format!("drop {}", query.locks[i])) {
                query.locks.remove(i);
                break;
            }
        }
        self.done()
    }

    fn pre_visit_select(&mut self, select: &mut Select) -> ControlFlow<()> {
        self.condition(&mut select.selection, "WHERE");
        for table in &mut select.from {
            for join in &mut table.joins {
                let constraint = match &mut join.join_operator {
                    JoinOperator::Join(c)
                    | JoinOperator::Inner(c)
                    | JoinOperator::Left(c)
                    | JoinOperator::LeftOuter(c) => c,
                    _ => continue,
                };
                if let JoinConstraint::On(on) = constraint {
                    if !matches!(
                        on,
                        Expr::BinaryOp {
                            op: BinaryOperator::And,
                            ..
                        }
                    ) && self.here(|| format!("drop ON {on}"))
                    {
                        *constraint = JoinConstraint::None;
                    }
                }
            }
        }
        self.done()
    }

    fn pre_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        if let Expr::BinaryOp { left, op, right } = expr {
            // One conjunct at a time: a side that is itself an `AND` is
            // taken apart where it is visited.
            let and = |e: &Expr| {
                matches!(
                    e,
                    Expr::BinaryOp {
                        op: BinaryOperator::And,
                        ..
                    }
                )
            };
            if *op == BinaryOperator::And {
                if !and(right) && self.here(|| format!("drop `{right}` from `{left} AND {right}`"))
                {
                    *expr = (**left).clone();
                    return ControlFlow::Break(());
                }
                if !and(left) && self.here(|| format!("drop `{left}` from `{left} AND {right}`")) {
                    *expr = (**right).clone();
                    return ControlFlow::Break(());
                }
            }
            let flipped = match op {
                BinaryOperator::Lt => Some(BinaryOperator::LtEq),
                BinaryOperator::LtEq => Some(BinaryOperator::Lt),
                BinaryOperator::Gt => Some(BinaryOperator::GtEq),
                BinaryOperator::GtEq => Some(BinaryOperator::Gt),
                BinaryOperator::Eq => Some(BinaryOperator::NotEq),
                BinaryOperator::NotEq => Some(BinaryOperator::Eq),
                _ => None,
            };
            if let Some(flipped) = flipped {
                if self.here(|| format!("`{left} {op} {right}` becomes `{left} {flipped} {right}`"))
                {
                    *op = flipped;
                }
            }
        }
        self.done()
    }

    fn pre_visit_value(&mut self, value: &mut ValueWithSpan) -> ControlFlow<()> {
        if let Some(status) = is_status(&value.value).map(str::to_string) {
            for other in self.statuses.iter().filter(|s| **s != status) {
                if self.here(|| format!("'{status}' becomes '{other}'")) {
                    value.value = Value::SingleQuotedString(other.clone());
                    break;
                }
            }
        }
        self.done()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The mutants of one SQL string, as their descriptions and texts.
    fn mutants(sql: &str) -> Vec<(String, String)> {
        let statements = Parser::parse_sql(&SQLiteDialect {}, sql).unwrap();
        let statuses = vec!["PENDING".to_string(), "SENT".to_string()];
        let mut sites = Sites::count(&statuses);
        let _ = statements[0].clone().visit(&mut sites);
        (0..sites.found.len())
            .map(|target| {
                let mut mutated = statements[0].clone();
                let _ = mutated.visit(&mut Sites::apply(&statuses, target));
                (sites.found[target].clone(), mutated.to_string())
            })
            .collect()
    }

    #[test]
    fn each_conjunct_is_dropped_once_and_each_comparison_flipped() {
        let all = mutants("UPDATE outbox SET status = 'SENT', attempts = ?4 WHERE id = ?1 AND claimed_by = ?2 AND claimed_at < ?3");
        let texts: Vec<&str> = all.iter().map(|(_, t)| t.as_str()).collect();
        for want in [
            "UPDATE outbox SET attempts = ?4 WHERE id = ?1 AND claimed_by = ?2 AND claimed_at < ?3",
            "UPDATE outbox SET status = 'SENT' WHERE id = ?1 AND claimed_by = ?2 AND claimed_at < ?3",
            "UPDATE outbox SET status = 'SENT', attempts = ?4 WHERE id = ?1 AND claimed_by = ?2",
            "UPDATE outbox SET status = 'SENT', attempts = ?4 WHERE id = ?1 AND claimed_at < ?3",
            "UPDATE outbox SET status = 'SENT', attempts = ?4 WHERE claimed_by = ?2 AND claimed_at < ?3",
            "UPDATE outbox SET status = 'SENT', attempts = ?4 WHERE id = ?1 AND claimed_by = ?2 AND claimed_at <= ?3",
            "UPDATE outbox SET status = 'SENT', attempts = ?4 WHERE id <> ?1 AND claimed_by = ?2 AND claimed_at < ?3",
            "UPDATE outbox SET status = 'PENDING', attempts = ?4 WHERE id = ?1 AND claimed_by = ?2 AND claimed_at < ?3",
        ] {
            assert!(texts.contains(&want), "{want} not among {texts:#?}");
        }
        // Three conjuncts: three drops, never two at once.
        let drops = all
            .iter()
            .filter(|(what, _)| what.contains("` from `"))
            .count();
        assert_eq!(drops, 3, "{all:#?}");
        assert_eq!(all.len(), texts.iter().collect::<BTreeSet<_>>().len());
    }

    #[test]
    fn a_claim_loses_its_order_limit_and_returning_columns_and_an_upsert_its_update() {
        let claim = mutants(
            "UPDATE outbox SET status = 'SENT' WHERE id IN (SELECT id FROM outbox WHERE status = 'PENDING' ORDER BY id LIMIT ?3) RETURNING id, body",
        );
        let said: Vec<&str> = claim.iter().map(|(w, _)| w.as_str()).collect();
        for want in [
            "drop ORDER BY id",
            "drop LIMIT ?3",
            "drop `id` from RETURNING",
            "drop `body` from RETURNING",
        ] {
            assert!(said.contains(&want), "{want} not among {said:#?}");
        }
        let upsert = mutants("INSERT INTO prefs (person, on_) VALUES (?1, ?2) ON CONFLICT (person) DO UPDATE SET on_ = excluded.on_");
        assert!(
            upsert
                .iter()
                .any(|(_, t)| t.ends_with("ON CONFLICT(person) DO NOTHING")),
            "{upsert:#?}"
        );
        let begin = mutants("BEGIN IMMEDIATE");
        assert_eq!(begin.len(), 1, "{begin:#?}");
        assert!(!begin[0].1.contains("IMMEDIATE"), "{begin:#?}");
    }

    #[test]
    fn a_format_string_takes_its_consts_in_and_keeps_its_holes() {
        let consts = HashMap::from([(
            "OURS".to_string(),
            "id = ?1 AND claimed_at = ?2".to_string(),
        )]);
        let (text, holes) = unformat("UPDATE t SET n = {n} WHERE {OURS} AND k = '{{x}}'", &consts);
        assert_eq!(
            text,
            "UPDATE t SET n = format_hole_0 WHERE id = ?1 AND claimed_at = ?2 AND k = '{x}'"
        );
        assert_eq!(
            holes,
            vec![("format_hole_0".to_string(), "{n}".to_string())]
        );
    }

    #[test]
    fn strings_are_found_with_their_places_and_doc_comments_are_not() {
        let source = "/// SELECT nothing: a doc comment\nconst Q: &str = \"SELECT 1\";\nfn f() { g(&format!(r#\"UPDATE t SET a = {x}\"#)); }\n";
        let found = Strings::find(source).unwrap();
        let values: Vec<(&str, bool)> = found
            .literals
            .iter()
            .map(|l| (l.value.as_str(), l.formatted))
            .collect();
        assert_eq!(
            values,
            vec![("SELECT 1", false), ("UPDATE t SET a = {x}", true)]
        );
        assert_eq!(
            &source[found.literals[1].span.clone()],
            "r#\"UPDATE t SET a = {x}\"#"
        );
        assert_eq!(found.consts.get("Q").map(String::as_str), Some("SELECT 1"));
    }
}
