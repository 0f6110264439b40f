//! What every actor tells the debug page about itself, and the two handlers each supervised
//! actor has: [`GetActorState`] (the debug page, the registry's watchdog) and [`Panic`] (fault
//! injection). An actor implements [`Inspect`] and says `supervised!(MyActor)`; the macro
//! writes both handlers, so a new actor repeats none of it.

use dockerlet_messages::debug::{ActorState, DebugView};
use serde_json::Value;

/// An actor's self-description for the debug page.
pub trait Inspect {
    /// The actor's kind (`StatusActor`, `PlegActor`, …).
    const KIND: &'static str;
    /// The registry's name for its single instance (`status`, `pleg`, …); actors with many
    /// instances (PodWorkers) name each one through [`Inspect::instance`].
    const NAME: &'static str;

    /// The counter of messages handled since it was created (the `handled` field).
    fn handled(&mut self) -> &mut u64;

    /// This instance's name on the debug page.
    fn instance(&self) -> String {
        Self::NAME.to_string()
    }

    /// Its last error, if any.
    fn last_error(&self) -> Option<String> {
        None
    }

    /// Its figures, as free-form JSON.
    fn detail(&self) -> Value;

    /// A typed view the debug page renders and explains, if it has one.
    fn view(&self) -> Option<DebugView> {
        None
    }
}

/// The [`ActorState`] answer of `actor`, counting the question as a message handled.
pub fn state<A: Inspect>(actor: &mut A) -> ActorState {
    *actor.handled() += 1;
    ActorState {
        kind: A::KIND.to_string(),
        name: actor.instance(),
        messages_handled: *actor.handled(),
        restarts: 0,
        last_error: actor.last_error(),
        detail: actor.detail(),
        view: actor.view(),
    }
}

/// Write `Handler<GetActorState>` (from the actor's [`Inspect`]) and `Handler<Panic>` (fault
/// injection) for a supervised actor.
#[macro_export]
macro_rules! supervised {
    ($actor:ty) => {
        impl ::actix::Handler<::dockerlet_messages::debug::GetActorState> for $actor {
            type Result = ::actix::MessageResult<::dockerlet_messages::debug::GetActorState>;

            fn handle(&mut self, _: ::dockerlet_messages::debug::GetActorState, _: &mut Self::Context) -> Self::Result {
                ::actix::MessageResult($crate::inspect::state(self))
            }
        }

        impl ::actix::Handler<::dockerlet_messages::debug::Panic> for $actor {
            type Result = ();

            fn handle(&mut self, _: ::dockerlet_messages::debug::Panic, _: &mut Self::Context) {
                panic!(
                    "fault injection: {} asked to panic",
                    <$actor as $crate::inspect::Inspect>::KIND
                );
            }
        }
    };
}
