"""Structured output: turn a record description into a JSON object that conforms to a given JSON schema.

One domain per (record type, source style): "kv" sources are 'Label: value' lines, "prose" sources are sentences.
Difficulty = number of fields (2, 4, 6, all incl. arrays) and distractor facts that must be left out.
The whole final assistant message must be the JSON object (no code fences, no prose); the verifier checks the
schema strictly (types, patterns, no extra keys) and then every value.

    .venv/bin/python -m domains sample structured.person_kv --seed 0 --difficulty 0
"""
from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from domains import schema
from domains.core import Domain, Reward, Task

FIRST = ["Alice", "Bruno", "Chiara", "Dmitri", "Esther", "Farid", "Greta", "Hiro", "Ines", "Jonas", "Keira", "Luis"]
LAST = ["Smith", "Okafor", "Rossi", "Ivanov", "Cohen", "Haddad", "Berg", "Tanaka", "Silva", "Weber", "Moreau"]
CITIES = ["Paris", "Lagos", "Osaka", "Lima", "Oslo", "Denver", "Porto", "Hanoi", "Cairo", "Quito", "Perth"]
WORDS = ["river", "falcon", "ember", "harbor", "maple", "quartz", "lantern", "meadow", "comet", "cedar", "delta"]


@dataclass
class F:
    name: str
    sch: dict
    gen: Callable[[random.Random], Any]
    label: str                      # kv source: "Label: value"
    prose: str | tuple[str, str]    # "{v}" template, or (if true, if false) for booleans
    show: Callable[[Any], str] = str


def _date(r):
    return f"{r.randint(2015, 2030)}-{r.randint(1, 12):02d}-{r.randint(1, 28):02d}"


def _time(r):
    return f"{r.randint(0, 23):02d}:{r.choice([0, 15, 30, 45]):02d}"


def _money(r, hi=500):
    return r.randint(100, hi * 100) / 100


def _words(r, k=3):
    return r.sample(WORDS, k)


S, I, N, B = {"type": "string"}, {"type": "integer"}, {"type": "number"}, {"type": "boolean"}
ARR = {"type": "array", "items": {"type": "string"}}
LIST = lambda xs: ", ".join(xs)  # noqa: E731

RECORDS: dict[str, tuple[str, list[F]]] = {
    "person": ("a person", [
        F("name", S, lambda r: f"{r.choice(FIRST)} {r.choice(LAST)}", "Name", "The person is called {v}."),
        F("age", {"type": "integer", "minimum": 0, "maximum": 130}, lambda r: r.randint(18, 90), "Age", "They are {v} years old."),
        F("city", S, lambda r: r.choice(CITIES), "City", "They live in {v}."),
        F("email", {"type": "string", "pattern": r"[a-z]+@[a-z]+\.com"}, lambda r: f"{r.choice(WORDS)}@{r.choice(WORDS)}.com", "Email", "Their email address is {v}."),
        F("is_member", B, lambda r: r.random() < 0.5, "Member", ("They are a club member.", "They are not a club member."), lambda v: "yes" if v else "no"),
        F("height_cm", I, lambda r: r.randint(150, 200), "Height (cm)", "They are {v} cm tall."),
        F("hobbies", ARR, _words, "Hobbies", "Their hobbies are {v}.", LIST),
    ]),
    "product": ("a product", [
        F("sku", {"type": "string", "pattern": r"[A-Z]{3}-\d{4}"}, lambda r: f"{''.join(r.choice('ABCDEFGHJKLMNP') for _ in range(3))}-{r.randint(1000, 9999)}", "SKU", "Its SKU is {v}."),
        F("name", S, lambda r: f"{r.choice(WORDS).title()} {r.choice(['Lamp', 'Chair', 'Kettle', 'Desk', 'Fan'])}", "Product", "The product is the {v}."),
        F("price", {"type": "number", "minimum": 0}, _money, "Price (USD)", "It costs {v} dollars."),
        F("in_stock", B, lambda r: r.random() < 0.5, "In stock", ("It is in stock.", "It is out of stock."), lambda v: "yes" if v else "no"),
        F("quantity", I, lambda r: r.randint(0, 500), "Quantity", "There are {v} units in the warehouse."),
        F("category", {"type": "string", "enum": ["home", "office", "garden", "kitchen"]}, lambda r: r.choice(["home", "office", "garden", "kitchen"]), "Category", "It belongs to the {v} category."),
        F("tags", ARR, _words, "Tags", "It is tagged {v}.", LIST),
    ]),
    "event": ("an event", [
        F("title", S, lambda r: f"{r.choice(WORDS).title()} {r.choice(['Summit', 'Fair', 'Meetup', 'Gala'])}", "Event", "The event is the {v}."),
        F("date", {"type": "string", "pattern": r"\d{4}-\d{2}-\d{2}"}, _date, "Date", "It takes place on {v}."),
        F("start_time", {"type": "string", "pattern": r"\d{2}:\d{2}"}, _time, "Starts", "It starts at {v}."),
        F("location", S, lambda r: r.choice(CITIES), "Location", "It is held in {v}."),
        F("capacity", I, lambda r: r.randint(20, 5000), "Capacity", "Up to {v} people can attend."),
        F("online", B, lambda r: r.random() < 0.5, "Online", ("It is also streamed online.", "It is not streamed online."), lambda v: "yes" if v else "no"),
        F("speakers", ARR, lambda r: r.sample(FIRST, 3), "Speakers", "The speakers are {v}.", LIST),
    ]),
    "book": ("a book", [
        F("title", S, lambda r: f"The {r.choice(WORDS).title()} of {r.choice(CITIES)}", "Title", "The book is titled {v}."),
        F("author", S, lambda r: f"{r.choice(FIRST)} {r.choice(LAST)}", "Author", "It was written by {v}."),
        F("year", I, lambda r: r.randint(1900, 2024), "Year", "It was published in {v}."),
        F("pages", I, lambda r: r.randint(80, 900), "Pages", "It has {v} pages."),
        F("isbn", {"type": "string", "pattern": r"\d{3}-\d{10}"}, lambda r: f"978-{r.randint(10 ** 9, 10 ** 10 - 1)}", "ISBN", "Its ISBN is {v}."),
        F("genre", {"type": "string", "enum": ["fiction", "history", "science", "poetry"]}, lambda r: r.choice(["fiction", "history", "science", "poetry"]), "Genre", "It is a {v} book."),
        F("translations", ARR, lambda r: r.sample(["French", "German", "Hindi", "Korean", "Swahili"], 2), "Translations", "It was translated into {v}.", LIST),
    ]),
    "flight": ("a flight", [
        F("flight_no", {"type": "string", "pattern": r"[A-Z]{2}\d{3,4}"}, lambda r: f"{r.choice(['LH', 'AF', 'QR', 'NZ', 'KL'])}{r.randint(100, 9999)}", "Flight", "This is flight {v}."),
        F("origin", {"type": "string", "pattern": r"[A-Z]{3}"}, lambda r: r.choice(["CDG", "LOS", "KIX", "LIM", "OSL"]), "From", "It departs from {v}."),
        F("destination", {"type": "string", "pattern": r"[A-Z]{3}"}, lambda r: r.choice(["DEN", "OPO", "HAN", "CAI", "PER"]), "To", "It arrives at {v}."),
        F("departure", {"type": "string", "pattern": r"\d{2}:\d{2}"}, _time, "Departure", "It leaves at {v}."),
        F("duration_min", I, lambda r: r.randint(45, 900), "Duration (min)", "The flight takes {v} minutes."),
        F("seats_left", I, lambda r: r.randint(0, 200), "Seats left", "{v} seats are still free."),
        F("meals", ARR, lambda r: r.sample(["vegan", "kosher", "halal", "standard"], 2), "Meals", "Meal options are {v}.", LIST),
    ]),
    "employee": ("an employee", [
        F("employee_id", I, lambda r: r.randint(1000, 99999), "Employee ID", "Their employee number is {v}."),
        F("first_name", S, lambda r: r.choice(FIRST), "First name", "Their first name is {v}."),
        F("last_name", S, lambda r: r.choice(LAST), "Last name", "Their last name is {v}."),
        F("department", {"type": "string", "enum": ["sales", "legal", "research", "finance"]}, lambda r: r.choice(["sales", "legal", "research", "finance"]), "Department", "They work in {v}."),
        F("salary", I, lambda r: r.randint(30, 200) * 1000, "Salary", "They earn {v} per year."),
        F("remote", B, lambda r: r.random() < 0.5, "Remote", ("They work remotely.", "They work on site."), lambda v: "yes" if v else "no"),
        F("skills", ARR, lambda r: r.sample(["python", "excel", "sql", "design", "law"], 3), "Skills", "Their skills are {v}.", LIST),
    ]),
    "weather": ("a weather report", [
        F("city", S, lambda r: r.choice(CITIES), "City", "This is the report for {v}."),
        F("temp_c", N, lambda r: r.randint(-200, 400) / 10, "Temperature (C)", "It is {v} degrees Celsius."),
        F("humidity", {"type": "integer", "minimum": 0, "maximum": 100}, lambda r: r.randint(5, 100), "Humidity (%)", "Humidity is {v} percent."),
        F("condition", {"type": "string", "enum": ["sunny", "cloudy", "rain", "snow"]}, lambda r: r.choice(["sunny", "cloudy", "rain", "snow"]), "Condition", "The sky condition is {v}."),
        F("wind_kph", N, lambda r: r.randint(0, 900) / 10, "Wind (km/h)", "Wind blows at {v} km/h."),
        F("alert", B, lambda r: r.random() < 0.3, "Alert", ("A weather alert is active.", "There is no weather alert."), lambda v: "yes" if v else "no"),
        F("hours", ARR, lambda r: [_time(r) for _ in range(3)], "Hours", "Readings were taken at {v}.", LIST),
    ]),
    "movie": ("a movie", [
        F("title", S, lambda r: f"{r.choice(WORDS).title()} {r.choice(['Rising', 'Falls', 'Road', 'Night'])}", "Title", "The film is {v}."),
        F("director", S, lambda r: f"{r.choice(FIRST)} {r.choice(LAST)}", "Director", "It was directed by {v}."),
        F("year", I, lambda r: r.randint(1950, 2024), "Year", "It came out in {v}."),
        F("rating", {"type": "number", "minimum": 0, "maximum": 10}, lambda r: r.randint(10, 99) / 10, "Rating", "Critics rate it {v} out of 10."),
        F("runtime_min", I, lambda r: r.randint(70, 200), "Runtime (min)", "It runs for {v} minutes."),
        F("color", B, lambda r: r.random() < 0.7, "In color", ("It is in color.", "It is in black and white."), lambda v: "yes" if v else "no"),
        F("genres", ARR, lambda r: r.sample(["drama", "comedy", "thriller", "western", "musical"], 2), "Genres", "Its genres are {v}.", LIST),
    ]),
    "address": ("an address", [
        F("street", S, lambda r: f"{r.choice(WORDS).title()} {r.choice(['Street', 'Road', 'Lane'])}", "Street", "The street is {v}."),
        F("number", I, lambda r: r.randint(1, 400), "Number", "The house number is {v}."),
        F("postcode", {"type": "string", "pattern": r"\d{5}"}, lambda r: f"{r.randint(0, 99999):05d}", "Postcode", "The postcode is {v}."),
        F("city", S, lambda r: r.choice(CITIES), "City", "The city is {v}."),
        F("country", {"type": "string", "enum": ["FR", "NG", "JP", "PE", "NO"]}, lambda r: r.choice(["FR", "NG", "JP", "PE", "NO"]), "Country code", "The country code is {v}."),
        F("residential", B, lambda r: r.random() < 0.5, "Residential", ("It is a residential address.", "It is a business address."), lambda v: "yes" if v else "no"),
        F("lines", ARR, lambda r: [f"Flat {r.randint(1, 30)}", f"Floor {r.randint(1, 9)}"], "Extra lines", "Extra address lines are {v}.", LIST),
    ]),
    "recipe": ("a recipe", [
        F("name", S, lambda r: f"{r.choice(WORDS).title()} {r.choice(['Soup', 'Stew', 'Salad', 'Pie'])}", "Recipe", "The recipe is {v}."),
        F("servings", I, lambda r: r.randint(1, 12), "Servings", "It serves {v}."),
        F("minutes", I, lambda r: r.randint(5, 240), "Time (min)", "It takes {v} minutes."),
        F("vegetarian", B, lambda r: r.random() < 0.5, "Vegetarian", ("It is vegetarian.", "It is not vegetarian."), lambda v: "yes" if v else "no"),
        F("difficulty", {"type": "string", "enum": ["easy", "medium", "hard"]}, lambda r: r.choice(["easy", "medium", "hard"]), "Difficulty", "It is {v} to make."),
        F("calories", I, lambda r: r.randint(100, 1500), "Calories", "One serving has {v} calories."),
        F("ingredients", ARR, lambda r: r.sample(["rice", "beans", "leek", "lime", "corn", "kale", "tofu"], 4), "Ingredients", "It needs {v}.", LIST),
    ]),
    "vehicle": ("a vehicle", [
        F("make", S, lambda r: r.choice(["Volvo", "Kia", "Fiat", "Tata", "Ford"]), "Make", "The car is made by {v}."),
        F("model", S, lambda r: f"{r.choice(WORDS).title()} {r.randint(1, 9)}", "Model", "The model is the {v}."),
        F("year", I, lambda r: r.randint(1995, 2025), "Year", "It was built in {v}."),
        F("mileage_km", I, lambda r: r.randint(0, 300000), "Mileage (km)", "It has driven {v} km."),
        F("fuel", {"type": "string", "enum": ["petrol", "diesel", "electric", "hybrid"]}, lambda r: r.choice(["petrol", "diesel", "electric", "hybrid"]), "Fuel", "It runs on {v}."),
        F("automatic", B, lambda r: r.random() < 0.5, "Automatic", ("It has an automatic gearbox.", "It has a manual gearbox."), lambda v: "yes" if v else "no"),
        F("features", ARR, lambda r: r.sample(["sunroof", "heated seats", "tow bar", "camera"], 2), "Features", "Its features are {v}.", LIST),
    ]),
    "account": ("a bank account", [
        F("iban", {"type": "string", "pattern": r"[A-Z]{2}\d{14}"}, lambda r: f"{r.choice(['DE', 'FR', 'NL'])}{r.randint(10 ** 13, 10 ** 14 - 1)}", "IBAN", "The IBAN is {v}."),
        F("holder", S, lambda r: f"{r.choice(FIRST)} {r.choice(LAST)}", "Holder", "The holder is {v}."),
        F("balance", N, lambda r: _money(r, 90000), "Balance", "The balance is {v}."),
        F("currency", {"type": "string", "enum": ["EUR", "USD", "JPY"]}, lambda r: r.choice(["EUR", "USD", "JPY"]), "Currency", "It is held in {v}."),
        F("opened", {"type": "string", "pattern": r"\d{4}-\d{2}-\d{2}"}, _date, "Opened", "It was opened on {v}."),
        F("frozen", B, lambda r: r.random() < 0.2, "Frozen", ("The account is frozen.", "The account is active."), lambda v: "yes" if v else "no"),
        F("cards", ARR, lambda r: [f"card-{r.randint(1000, 9999)}" for _ in range(2)], "Cards", "Its cards are {v}.", LIST),
    ]),
}
N_FIELDS = (2, 4, 6, 7)


def _say(f: F, v: Any, style: str) -> str:
    if style == "kv":
        return f"{f.label}: {f.show(v)}"
    if isinstance(f.prose, tuple):
        return f.prose[0] if v else f.prose[1]
    return f.prose.format(v=f.show(v))


class StructuredDomain(Domain):
    family = "structured"

    def __init__(self, record: str, style: str):
        self.record, self.style = record, style
        self.name = f"structured.{record}_{style}"
        self.description = f"{RECORDS[record][0]} from {'Label: value lines' if style == 'kv' else 'prose'} to JSON"

    def build(self, rng: random.Random, difficulty: int) -> dict:
        noun, fields = RECORDS[self.record]
        pool = [f for f in fields if difficulty == 3 or f.sch["type"] != "array"]
        chosen = sorted(rng.sample(pool, min(N_FIELDS[difficulty], len(pool))), key=fields.index)
        values = {f.name: f.gen(rng) for f in fields}
        want = {f.name: values[f.name] for f in chosen}
        shown = list(chosen)
        if difficulty >= 2:  # distractors: facts that are in the text but not in the schema
            shown += [f for f in fields if f not in chosen][:difficulty - 1]
        if difficulty >= 1:
            rng.shuffle(shown)
        sch = {"type": "object", "properties": {f.name: f.sch for f in chosen},
               "required": [f.name for f in chosen], "additionalProperties": False}
        source = ("\n" if self.style == "kv" else " ").join(_say(f, values[f.name], self.style) for f in shown)
        user = (f"Describe {noun} as JSON matching this schema:\n{json.dumps(sch, separators=(',', ':'))}\n\n"
                f"Source:\n{source}")
        system = "Reply with only a JSON object that matches the schema. No code fences, no other text."
        return {"messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
                "answer": want, "constraints": sch}

    def oracle(self, task: Task) -> Iterator[dict]:
        yield {"role": "assistant", "content": json.dumps(task.answer)}

    @staticmethod
    def parse(text: str) -> tuple[Any, str | None]:
        s = text.strip()
        if not s.startswith("{"):
            return None, "the message must be a bare JSON object (no code fences or prose)"
        try:
            return json.loads(s), None
        except json.JSONDecodeError as e:
            return None, f"not valid JSON: {e.msg} at char {e.pos}"

    def score(self, task: Task, trajectory: list[dict], pool: Any) -> Reward:
        obj, err = self.parse(trajectory[-1].get("content") or "")
        if err:
            return Reward.fail(err)
        problems = schema.validate(obj, task.constraints)
        if problems:
            return Reward.fail("schema violation", problems=problems[:10])
        wrong = sorted(k for k, v in task.answer.items() if not _same(obj.get(k), v))
        frac = 1 - len(wrong) / len(task.answer)
        return Reward(frac if wrong else 1.0, not wrong, {"wrong_fields": wrong})

    def format_ok(self, task: Task, text: str) -> bool:
        obj, err = self.parse(text)
        return err is None and not schema.validate(obj, task.constraints)


def _same(a: Any, b: Any) -> bool:
    """JSON equality where 12.5 == 12.50 but True != 1 and "3" != 3."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return abs(a - b) <= 1e-9 * max(1.0, abs(b))
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def domains() -> list[StructuredDomain]:
    return [StructuredDomain(r, s) for r in RECORDS for s in ("kv", "prose")]
