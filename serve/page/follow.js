// Following a streaming reply: the log keeps its newest line in view as text arrives, unless the user
// has scrolled up to read, until they scroll back down or a new turn begins.

/** Within this many pixels of the bottom counts as at the bottom. */
const SLACK = 24;

/**
 * Follows `scroller` (the log's scrolling box). `follow()` scrolls to the bottom unless the user has
 * scrolled away; `pin()` starts following again (a new turn, another conversation).
 */
export function followLog(scroller) {
  let following = true;
  let pinnedTop = 0; // where follow() last left the log; above it, and not at the bottom, is the user's doing
  const atBottom = () => scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight < SLACK;

  // A scroll event arrives a frame late, after more text may have come in, so follow() checks the
  // position itself too.
  function follow() {
    if (following && scroller.scrollTop < pinnedTop - 4 && !atBottom()) following = false;
    if (!following) return;
    scroller.scrollTop = scroller.scrollHeight;
    pinnedTop = scroller.scrollTop;
  }

  function pin() {
    following = true;
    pinnedTop = 0;
    follow();
  }

  scroller.addEventListener("scroll", () => {
    following = atBottom();
    if (following) pinnedTop = scroller.scrollTop;
  }, { passive: true });
  // The footer growing (Settings opened, a longer prompt, a phone's keyboard) shrinks the log: stay down.
  new ResizeObserver(follow).observe(scroller);
  return { follow, pin };
}
