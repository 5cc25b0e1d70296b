// Package planner decides what a publication does to one destination root.
// It is pure: desired outputs + catalog + storage facts + workflow + time in,
// a plan and the next catalog out. No I/O, no clock; of this module it
// imports only catalog, so every rule is a table test without a root.
//
// # A publication
//
// Build decides in this order; a refusal stops it with nothing planned to
// run:
//
//  1. Newest wins (Newer: the later created time, then the greater
//     digest, then the greater source id, so arrival order does not
//     matter). When the owner already holds a newer version of the
//     source, a replacement plan is Superseded and empty, unless
//     AllowOlder (an operator's roll back). An additive publication is a
//     patch and wins per path instead: a desired path whose record (or a
//     managed output in its way) holds a newer version of any of the
//     owner's sources is KeptNewer, left as it is; its other paths plan as
//     below. An additive roll back (AllowOlder) writes every path and
//     deletes the owner's records of newer versions of its source only
//     with DeleteLater.
//  2. The desired outputs must map to distinct paths, none of them a
//     folder of another.
//  3. Each desired path is planned against its record and what storage
//     holds there: create; update (Write when the bytes differ, are gone
//     or damaged, else only the record changes); unchanged; or collision,
//     when unmanaged content holds the path and the publication does not
//     adopt it (TakeOwnership; a legacy first run rewrites such paths).
//  4. What is in the way of a planned path (a file where a folder is
//     needed, files below a planned file): managed outputs are displaced,
//     deleted before the writes; unmanaged content blocks the path.
//  5. The replacement workflow deletes the owner's outputs the publication
//     no longer desires (and, on a legacy root, clears what is not
//     desired); a replacement that desires nothing is refused
//     (ErrEmptyReplacement). The additive workflow keeps them.
//  6. A delete set over MaxDeletes is refused (ErrTooManyDeletes).
//  7. A plan with collisions is blocked: Writes, Deletes and Displaced are
//     empty, so no caller can half-run it. Otherwise Next is the catalog
//     to commit and Changed says whether running the plan changes anything.
//
// # Maintenance
//
// Prune and Reconcile plan the maintenance commands on the same terms:
// prune removes an owner's records last updated before a cutoff,
// reconcile-state the selected records whose bytes are gone (a Selector
// names exactly one scope); both refuse a delete set over MaxDeletes.
// Verify needs no plan.
package planner
